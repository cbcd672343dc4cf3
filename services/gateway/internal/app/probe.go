package app

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"strings"
)

// ProbeStream opens the stream at url and checks what every stream opens with: a 200 text/event-stream
// answer whose first line is "retry:", followed by a keep-alive comment or an event. It is the chart's helm
// test (gateway probe-stream URL), run in the gateway's own image, which has no shell or curl. ctx bounds
// the wait.
func ProbeStream(ctx context.Context, url string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("probe: %s answered %s", url, resp.Status)
	}
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt != "text/event-stream" {
		return fmt.Errorf("probe: %s answered Content-Type %q", url, resp.Header.Get("Content-Type"))
	}
	br := bufio.NewReader(resp.Body)
	first := true
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			if ctx.Err() != nil {
				return fmt.Errorf("probe: no keep-alive or event from %s: %w", url, ctx.Err())
			}
			return fmt.Errorf("probe: reading %s: %w", url, err)
		}
		switch {
		case first && !strings.HasPrefix(line, "retry: "):
			return fmt.Errorf("probe: %s opened with %q, want a retry: line", url, line)
		case first:
			first = false
		case strings.HasPrefix(line, ":") || strings.HasPrefix(line, "data:"):
			return nil
		}
	}
}

// ErrProbeUsage is returned for a probe-stream command line without exactly one URL.
var ErrProbeUsage = errors.New("usage: gateway probe-stream URL")
