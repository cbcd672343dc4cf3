// Command gateway serves Kafka topics as Server-Sent Events streams.
//
// Configuration comes from flags, the environment (KAFKA_BROKERS, SSEGATE_TOPICS, SSEGATE_LISTEN and
// SSEGATE_<SETTING>) and an optional YAML file (--config); run with --help for the list.
package main

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/ssegate/ssegate/services/gateway/internal/app"
)

func main() {
	log := slog.New(slog.NewJSONHandler(os.Stderr, nil))
	if len(os.Args) > 1 && os.Args[1] == "probe-stream" {
		os.Exit(probe(os.Args[2:], log))
	}
	if len(os.Args) > 1 && os.Args[1] == "asyncapi" {
		os.Exit(asyncAPI(os.Args[2:], os.Getenv, os.Stdout, os.Stderr))
	}
	if len(os.Args) > 1 && os.Args[1] == "decode-id" {
		os.Exit(decodeID(os.Args[2:], os.Getenv, os.Stdout, os.Stderr))
	}
	cfg, err := app.Load(os.Args[1:], os.Getenv, os.Stderr)
	if errors.Is(err, app.ErrHelp) {
		os.Exit(0)
	}
	if err != nil {
		log.Error("invalid configuration: " + err.Error())
		os.Exit(2)
	}
	log = slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: cfg.LogLevel}))
	slog.SetDefault(log)

	if err := run(cfg, log); err != nil {
		log.Error("gateway failed: " + err.Error())
		os.Exit(1)
	}
}

// probe checks that a stream opens (the chart's helm test, in this image, which has no shell).
func probe(args []string, log *slog.Logger) int {
	if len(args) != 1 {
		log.Error(app.ErrProbeUsage.Error())
		return 2
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := app.ProbeStream(ctx, args[0]); err != nil {
		log.Error(err.Error())
		return 1
	}
	log.Info("stream answered", "url", args[0])
	return 0
}

func run(cfg app.Config, log *slog.Logger) error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	// The first signal starts the graceful shutdown; a second one ends the process at once.
	go func() {
		<-ctx.Done()
		stop()
	}()
	a, err := app.New(cfg, log)
	if err != nil {
		return err
	}
	return a.Run(ctx)
}
