package app

import (
	"fmt"
	"time"

	"github.com/ssegate/ssegate/pkg/settings"
	"github.com/ssegate/ssegate/services/gateway/internal/feed"
	"github.com/ssegate/ssegate/services/gateway/internal/schema"
)

// ValuesConfig is how record values and keys are written into frames, and, for the schema formats (avro,
// protobuf, json-schema), where their schemas come from: a registry or files.
type ValuesConfig struct {
	// Format is how record values are written into frames, for topics without their own in TopicFormats:
	// "auto" (safe text as it is, any other value base64 after a "base64:" prefix), "base64" (every value),
	// "text" (as it is, lossy for CR and bytes that are not UTF-8), or a schema format: "avro", "protobuf",
	// "json-schema" (decoded to JSON). Default auto.
	Format string
	// TopicFormats maps served topics to their own value format, overriding Format. Default none.
	TopicFormats map[string]string
	// KeyFormat is how keys (a tombstone's data) are written, for topics without their own in
	// TopicKeyFormats. Default: the topic's value format, or auto when that is a schema format.
	KeyFormat string
	// TopicKeyFormats maps served topics to their own key format. Default none.
	TopicKeyFormats map[string]string
	// Registry is the schema registry of the schema formats; Files the directory of schemas for clusters
	// without one. One of them when a topic has a schema format, not both.
	Registry schema.RegistryConfig
	Files    string
	// ValidateJSON validates json-schema values against their schema; off, they are passed through (as
	// compacted JSON). Default true.
	ValidateJSON bool
}

func valuesDefaults() ValuesConfig {
	return ValuesConfig{Format: "auto", ValidateJSON: true, Registry: schema.RegistryConfig{Timeout: 5 * time.Second}}
}

func valuesSettings(c *ValuesConfig) []settings.Setting {
	r := &c.Registry
	return []settings.Setting{
		setting("value-format", "how values are written into frames: auto (text as it is, other values base64), base64, text (as it is, lossy), or decoded to JSON from a schema registry's wire format: avro, protobuf, json-schema", settings.String(&c.Format)),
		setting("topic-value-format", "per-topic value formats overriding value-format, comma-separated topic=format pairs (orders=avro,logs=text)", settings.Map(&c.TopicFormats)),
		setting("key-format", "how keys (a tombstone's data) are written, with the same formats as value-format (default: the value format, or auto when that is a schema format)", settings.String(&c.KeyFormat)),
		setting("topic-key-format", "per-topic key formats overriding key-format, comma-separated topic=format pairs", settings.Map(&c.TopicKeyFormats)),
		setting("schema-registry-url", "schema registry of the avro, protobuf and json-schema formats (Confluent's REST API, or a compatible one), comma-separated URLs tried in order", settings.List(&r.URLs)),
		setting("schema-registry-username", "schema registry: basic authentication user (Confluent Cloud: the API key)", settings.String(&r.Username)),
		setting("schema-registry-password-file", "schema registry: file holding the basic authentication password", settings.String(&r.PasswordFile)),
		setting("schema-registry-token-file", "schema registry: file holding a bearer token, read again for every request", settings.String(&r.TokenFile)),
		setting("schema-registry-ca-file", "schema registry: PEM file of CAs to trust (default: system roots)", settings.String(&r.TLS.CAFile)),
		setting("schema-registry-cert-file", "schema registry: PEM client certificate for mutual TLS", settings.String(&r.TLS.CertFile)),
		setting("schema-registry-key-file", "schema registry: PEM key of the client certificate", settings.String(&r.TLS.KeyFile)),
		setting("schema-registry-timeout", "schema registry: longest one lookup of a schema may take; records of a schema not found in time go out undecodable", settings.Duration(&r.Timeout)),
		setting("schema-files", "directory of schemas by id (N.avsc, N.proto, N.json), for clusters without a schema registry", settings.String(&c.Files)),
		setting("json-schema-validate", "validate json-schema values against their schema (an invalid one goes out undecodable); false passes them through", settings.Bool(&c.ValidateJSON)),
	}
}

// topicFormats returns a served topic's value and key formats.
func (c ValuesConfig) topicFormats(topic string) (value, key feed.ValueFormat, err error) {
	name := c.formatName(topic)
	if value, err = feed.ParseValueFormat(name); err != nil {
		return 0, 0, fmt.Errorf("value format of topic %s: %w", topic, err)
	}
	key = value
	if value.Schema() != 0 {
		key = feed.ValueAuto
	}
	name = c.KeyFormat
	if f, ok := c.TopicKeyFormats[topic]; ok {
		name = f
	}
	if name != "" {
		if key, err = feed.ParseValueFormat(name); err != nil {
			return 0, 0, fmt.Errorf("key format of topic %s: %w", topic, err)
		}
	}
	return value, key, nil
}

// formatName is the name of a served topic's value format, as its settings give it.
func (c ValuesConfig) formatName(topic string) string {
	if f, ok := c.TopicFormats[topic]; ok {
		return f
	}
	return c.Format
}

// validateValues checks the formats, and that the schema formats have one source of schemas.
func (c Config) validateValues() error {
	v := c.Values
	invalid := func(name string) string {
		return fmt.Sprintf("invalid setting %s (%s)", name, settings.EnvName("SSEGATE_", name))
	}
	if _, err := feed.ParseValueFormat(v.Format); err != nil {
		return fmt.Errorf("%s: %w", invalid("value-format"), err)
	}
	if _, err := feed.ParseValueFormat(v.KeyFormat); err != nil && v.KeyFormat != "" {
		return fmt.Errorf("%s: %w", invalid("key-format"), err)
	}
	for _, s := range []struct {
		name string
		m    map[string]string
	}{{"topic-value-format", v.TopicFormats}, {"topic-key-format", v.TopicKeyFormats}} {
		if err := c.perTopic(s.m, func(topic, f string) error {
			if _, err := feed.ParseValueFormat(f); err != nil {
				return fmt.Errorf("topic %s: %w", topic, err)
			}
			return nil
		}); err != nil {
			return fmt.Errorf("%s: %w", invalid(s.name), err)
		}
	}
	schemas := ""
	for _, topic := range c.Topics {
		if value, key, _ := v.topicFormats(topic); value.Schema() != 0 || key.Schema() != 0 {
			schemas = topic
		}
	}
	hasRegistry := len(v.Registry.URLs) > 0
	switch {
	case hasRegistry && v.Files != "":
		return fmt.Errorf("invalid settings schema-registry-url and schema-files: set one of them, not both")
	case schemas != "" && !hasRegistry && v.Files == "":
		return fmt.Errorf("topic %s has a schema format (avro, protobuf or json-schema): set schema-registry-url or schema-files", schemas)
	case v.Registry.Timeout < 100*time.Millisecond || v.Registry.Timeout > time.Minute:
		return fmt.Errorf("%s: must be from 100ms to 1m, got %s", invalid("schema-registry-timeout"), v.Registry.Timeout)
	case hasRegistry:
		if err := v.Registry.Validate(); err != nil {
			return fmt.Errorf("invalid setting %w", err)
		}
	}
	return nil
}

// schemaSource returns where schemas come from: the registry, the files, or nil when neither is set.
func (c ValuesConfig) schemaSource() (schema.Source, error) {
	if len(c.Registry.URLs) > 0 {
		return schema.NewRegistry(c.Registry)
	}
	if c.Files != "" {
		fs, err := schema.LoadFiles(c.Files)
		if err != nil {
			return nil, err
		}
		return fs, nil
	}
	return nil, nil
}
