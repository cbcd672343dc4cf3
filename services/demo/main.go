// Command demo produces a stream of keyed JSON order events into Kafka, for `make run` and for trying the
// gateway by hand. It creates the topic when it does not exist.
//
//	go run ./services/demo --topic orders --partitions 3 --rate 3
//
// Each record's key is the order id, its "event" header the event type (order.created, order.paid,
// order.shipped, or order.cancelled), and every so often an order is deleted with a tombstone.
//
// With --user-topic, every order event is also written to that topic keyed by its customer ("user-ada"), for a
// per-user stream; with --login, a DEMO-ONLY login page hands out tokens for those users (see login.go).
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/ssegate/ssegate/services/demo/orders"
)

func main() {
	if err := run(); err != nil {
		slog.New(slog.NewJSONHandler(os.Stderr, nil)).Error("demo producer failed: " + err.Error())
		os.Exit(1)
	}
}

func run() error {
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	var level slog.Level
	fs.TextVar(&level, "log-level", slog.LevelInfo, "lowest level logged: debug, info, warn, error")
	brokers := fs.String("brokers", os.Getenv("KAFKA_BROKERS"), "Kafka brokers, comma-separated (env KAFKA_BROKERS)")
	topic := fs.String("topic", "orders", "topic to produce to")
	partitions := fs.Int("partitions", 3, "partitions of the topic when it is created")
	rate := fs.Float64("rate", 3, "events per second")
	userTopic := fs.String("user-topic", "", "topic to write every order event to again, keyed by its customer (user-<name>); empty means none")
	createOnly := fs.Bool("create-only", false, "create the topics (when they do not exist) and exit")
	var lc loginConfig
	fs.StringVar(&lc.listen, "login", "", "DEMO ONLY: address of a login page that hands out tokens for the user topic to anyone; empty means none")
	fs.StringVar(&lc.gateway, "gateway", "http://127.0.0.1:8080", "the gateway's URL, for the login page")
	fs.StringVar(&lc.secretFile, "token-secret-file", "", "file holding the HMAC secret the gateway verifies tokens with (its auth-hmac-secret-file)")
	fs.DurationVar(&lc.lifetime, "token-lifetime", 2*time.Minute, "how long the demo tokens live")
	if err := fs.Parse(os.Args[1:]); err != nil {
		return err
	}
	log := slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	lc.topic = *userTopic
	if lc.listen != "" && (lc.topic == "" || lc.secretFile == "") {
		return errors.New("--login needs --user-topic and --token-secret-file")
	}
	if *brokers == "" {
		return errors.New("no brokers: set KAFKA_BROKERS or --brokers")
	}
	if *rate <= 0 || *partitions <= 0 || *partitions > 1000 {
		return errors.New("--rate must be positive and --partitions from 1 to 1000")
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()

	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(*brokers, ",")...))
	if err != nil {
		return err
	}
	defer cl.Close()
	for _, name := range []string{*topic, *userTopic} {
		if name == "" {
			continue
		}
		// CreateTopic returns the topic's own error as its error too: an existing topic is fine.
		_, err := kadm.NewClient(cl).CreateTopic(ctx, int32(*partitions), 1, nil, name) //nolint:gosec // bounded above
		if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
			return fmt.Errorf("create topic %s: %w", name, err)
		}
	}
	if *createOnly {
		return nil
	}
	if lc.listen != "" {
		stopLogin, err := serveLogin(ctx, lc, log)
		if err != nil {
			return err
		}
		defer stopLogin()
	}
	log.Info("producing demo orders", "topic", *topic, "user_topic", *userTopic, "rate", *rate)

	tick := time.NewTicker(time.Duration(float64(time.Second) / *rate))
	defer tick.Stop()
	for seq := 1; ; seq++ {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
		id := orders.Key(rand.IntN(200)) //nolint:gosec // demo data
		rec := &kgo.Record{Key: []byte(id)}
		if seq%25 != 0 { // else a tombstone: the order is deleted
			rec = orders.Order{
				ID:       id,
				Status:   orders.Statuses[rand.IntN(len(orders.Statuses))],   //nolint:gosec // demo data
				Customer: orders.Customers[rand.IntN(len(orders.Customers))], //nolint:gosec // demo data
				Amount:   float64(rand.IntN(20000)) / 100,                    //nolint:gosec // demo data
				Seq:      seq,
				SentAt:   time.Now().UTC().Format(time.RFC3339Nano),
			}.Record()
		}
		rec.Topic = *topic
		recs := []*kgo.Record{rec}
		if *userTopic != "" && rec.Value != nil {
			var o orders.Order
			_ = json.Unmarshal(rec.Value, &o)
			recs = append(recs, &kgo.Record{Topic: *userTopic, Key: []byte("user-" + o.Customer), Value: rec.Value, Headers: rec.Headers})
		}
		if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			log.Warn("produce failed", "err", err)
		}
	}
}
