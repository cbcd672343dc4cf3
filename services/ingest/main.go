// Command ingest follows external Server-Sent Events streams and writes each event to a Kafka topic,
// exactly once for read_committed consumers.
//
// Sources come from the YAML file given by --config; Kafka from KAFKA_BROKERS; every other setting has a
// flag, an environment variable SSEGATE_INGEST_<SETTING> and a key in the file. Run with --help for the
// list, and see docs/ingest.md.
package main

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/ssegate/ssegate/services/ingest/internal/app"
)

func main() {
	log := slog.New(slog.NewJSONHandler(os.Stderr, nil))
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
		log.Error("ingest failed: " + err.Error())
		os.Exit(1)
	}
}

func run(cfg app.Config, log *slog.Logger) error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	a, err := app.New(cfg, log)
	if err != nil {
		return err
	}
	return a.Run(ctx)
}
