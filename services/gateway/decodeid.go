package main

import (
	"fmt"
	"io"

	"github.com/ssegate/ssegate/pkg/position"
)

// decodeID prints each position id of args as one line per partition, "partition P offset O" (the last offset
// the client got or passed in P), for comparing with kcat (docs/runbooks/kcat.md). An id that does not parse
// is reported on errOut with the reason the gateway would give in a resync, and makes the exit status 1.
func decodeID(args []string, out, errOut io.Writer) int {
	if len(args) == 0 {
		_, _ = io.WriteString(errOut, "usage: gateway decode-id ID [ID...]\n")
		return 2
	}
	status := 0
	for _, id := range args {
		var b []byte
		if len(args) > 1 {
			b = fmt.Appendf(b, "%s\n", id)
		}
		v, err := position.Parse(id)
		if err != nil {
			_, _ = out.Write(b)
			if _, werr := errOut.Write(fmt.Appendf(nil, "invalid id %q: %v\n", id, err)); werr != nil {
				return 1
			}
			status = 1
			continue
		}
		if v.Len() == 0 {
			b = append(b, "no partition: the client has seen nothing yet\n"...)
		}
		for i := range v.Len() {
			e := v.At(i)
			b = fmt.Appendf(b, "partition %d offset %d\n", e.Partition, e.Offset)
		}
		if _, err := out.Write(b); err != nil {
			return 1
		}
	}
	return status
}
