package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/ssegate/ssegate/services/gateway/internal/app"
)

// asyncAPI prints the AsyncAPI document of every topic the gateway's settings serve (the same settings as the
// gateway: flags, SSEGATE_... and KAFKA_BROKERS, --config), with each schema-format topic's payload schema
// from the registry, indented, to out. Kafka is not contacted. Exit status 2 for settings that do not load.
func asyncAPI(args []string, getenv func(string) string, out, errOut io.Writer) int {
	cfg, err := app.Load(args, getenv, errOut)
	if errors.Is(err, app.ErrHelp) {
		return 0
	}
	if err != nil {
		_, _ = fmt.Fprintf(errOut, "asyncapi: invalid configuration: %v\n", err)
		return 2
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	doc, err := app.AsyncAPI(ctx, cfg)
	if err != nil {
		_, _ = fmt.Fprintf(errOut, "asyncapi: %v\n", err)
		return 2
	}
	enc := json.NewEncoder(out)
	enc.SetIndent("", "  ")
	if err := enc.Encode(doc); err != nil {
		_, _ = fmt.Fprintf(errOut, "asyncapi: %v\n", err)
		return 1
	}
	return 0
}
