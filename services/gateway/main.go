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

	"github.com/ssegate/ssegate/services/gateway/internal/app"
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
		log.Error("gateway failed: " + err.Error())
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
