package settings

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"

	"github.com/goccy/go-yaml"

	"github.com/ssegate/ssegate/pkg/kafkaconn"
	"github.com/ssegate/ssegate/pkg/secret"
)

// ErrHelp is returned by Load when --help was asked for; the usage has been written.
var ErrHelp = flag.ErrHelp

// Setting is one configuration knob and where it can come from.
type Setting struct {
	// Name is the flag's name and the YAML key.
	Name string
	// Envs are the environment variables that set it, the first set one winning.
	Envs []string
	// Usage describes it, default included, for --help.
	Usage string
	// Value parses and stores it.
	Value flag.Value
	// Group names settings that write the same field; empty means the setting's own name.
	Group string
	// FlagOnly settings are flags only: Envs is ignored and the file may not hold them as keys. False (the
	// default) means all three sources.
	FlagOnly bool
	// NoFlag settings have no flag, only Envs and the file: a secret given as a flag shows in process
	// lists. Load refuses the flag with an error naming the environment variable to use instead. False
	// (the default) means all three sources.
	NoFlag bool
}

func (s Setting) group() string {
	if s.Group != "" {
		return s.Group
	}
	return s.Name
}

// EnvName returns the conventional environment variable of a setting: prefix, then the name in upper case
// with dashes as underscores (EnvName("SSEGATE_", "ring-bytes") is SSEGATE_RING_BYTES).
func EnvName(prefix, name string) string {
	return prefix + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
}

// Kafka returns the settings of a Kafka connection (brokers, client id, TLS, SASL) writing into c, with
// environment variables under prefix; the brokers can also come from KAFKA_BROKERS.
func Kafka(c *kafkaconn.Config, prefix string) []Setting {
	s := func(name, usage string, v flag.Value) Setting {
		return Setting{Name: name, Envs: []string{EnvName(prefix, name)}, Usage: usage, Value: v}
	}
	return []Setting{
		{
			Name: "kafka-brokers", Envs: []string{"KAFKA_BROKERS", EnvName(prefix, "kafka-brokers")},
			Usage: "Kafka seed brokers, host:port, comma-separated (required)", Value: List(&c.Brokers),
		},
		s("kafka-client-id", "client id sent to Kafka", String(&c.ClientID)),
		s("kafka-client-rack", "rack (availability zone) of this client: the live feed fetches from a replica in it when the cluster's replica selector is rack-aware (default: the leader)", String(&c.Rack)),
		s("kafka-tls", "connect to Kafka with TLS", Bool(&c.TLS.Enabled)),
		s("kafka-tls-ca-file", "PEM file of CAs to trust (default: system roots), read again when it changes; implies TLS", String(&c.TLS.CAFile)),
		s("kafka-tls-cert-file", "PEM client certificate for mutual TLS, read again when it changes; implies TLS", String(&c.TLS.CertFile)),
		s("kafka-tls-key-file", "PEM key of the client certificate, read again when it changes", String(&c.TLS.KeyFile)),
		s("kafka-tls-server-name", "name to check in the brokers' certificates", String(&c.TLS.ServerName)),
		s("kafka-tls-insecure-skip-verify", "do not verify broker certificates (tests only)", Bool(&c.TLS.InsecureSkipVerify)),
		s("kafka-sasl-mechanism", "SASL mechanism: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER or AWS_MSK_IAM (credentials from the AWS environment variables) (default: none)", String(&c.SASL.Mechanism)),
		s("kafka-sasl-username", "SASL username", String(&c.SASL.Username)),
		s("kafka-sasl-allow-plaintext", "allow SASL PLAIN without TLS, and an http OAUTHBEARER token endpoint, which send the password or secret in clear (default: refused)", Bool(&c.SASL.AllowPlaintext)),
		{
			Name: "kafka-sasl-password", Envs: []string{EnvName(prefix, "kafka-sasl-password")}, Group: "kafka-sasl-password", NoFlag: true,
			Usage: "SASL password", Value: String(&c.SASL.Password),
		},
		{
			Name: "kafka-sasl-password-file", Envs: []string{EnvName(prefix, "kafka-sasl-password-file")}, Group: "kafka-sasl-password",
			Usage: "file holding the SASL password, read again when it changes (wins over kafka-sasl-password from the same source)", Value: SecretFile(&c.SASL.PasswordFile),
		},
		s("kafka-sasl-oauth-token-url", "OAUTHBEARER: the identity provider's token endpoint (client-credentials grant)", String(&c.SASL.OAuth.TokenURL)),
		s("kafka-sasl-oauth-client-id", "OAUTHBEARER: the client id", String(&c.SASL.OAuth.ClientID)),
		{
			Name: "kafka-sasl-oauth-client-secret", Envs: []string{EnvName(prefix, "kafka-sasl-oauth-client-secret")}, Group: "kafka-sasl-oauth-client-secret", NoFlag: true,
			Usage: "OAUTHBEARER: the client secret", Value: String(&c.SASL.OAuth.ClientSecret),
		},
		{
			Name: "kafka-sasl-oauth-client-secret-file", Envs: []string{EnvName(prefix, "kafka-sasl-oauth-client-secret-file")}, Group: "kafka-sasl-oauth-client-secret",
			Usage: "OAUTHBEARER: file holding the client secret, read again when it changes (wins over kafka-sasl-oauth-client-secret from the same source)", Value: SecretFile(&c.SASL.OAuth.ClientSecretFile),
		},
		s("kafka-sasl-oauth-scope", "OAUTHBEARER: the scope to ask for, space-separated (default: none)", String(&c.SASL.OAuth.Scope)),
		s("kafka-sasl-oauth-audience", "OAUTHBEARER: the audience parameter some providers need (default: none)", String(&c.SASL.OAuth.Audience)),
		s("kafka-sasl-oauth-extensions", "OAUTHBEARER: SASL extensions sent with the token, comma-separated key=value pairs (Confluent Cloud: logicalCluster=lkc-...,identityPoolId=pool-...)", Map(&c.SASL.OAuth.Extensions)),
	}
}

// Redis is how to reach Redis. Its String and GoString hide the password.
type Redis struct {
	// Addr is host:port. Empty means no Redis.
	Addr string
	// Username and Password authenticate (AUTH); empty means none. Password is never logged.
	Username, Password string
	// PasswordFile is a file holding the password, read again when it changes (new connections use a
	// rotated Secret); it wins over Password. Empty means Password.
	PasswordFile string
	// DB is the database number. Default 0.
	DB int
}

// String describes the configuration without the password.
func (r Redis) String() string {
	pw := ""
	if r.Password != "" {
		pw = "(hidden)"
	}
	return fmt.Sprintf("{Addr:%s Username:%s Password:%s PasswordFile:%s DB:%d}", r.Addr, r.Username, pw, r.PasswordFile, r.DB)
}

// Credentials returns what go-redis's Options.CredentialsProviderContext wants: the username, and the
// password as it is or from PasswordFile as the file is when a connection is made.
func (r Redis) Credentials() func(context.Context) (username, password string, err error) {
	pw := secret.Pick(r.Password, "redis-password-file", r.PasswordFile)
	user := r.Username
	return func(context.Context) (string, string, error) {
		p, err := pw.Get()
		return user, p, err
	}
}

// GoString is String, so that %#v does not print the password either.
func (r Redis) GoString() string { return "settings.Redis" + r.String() }

// RedisSettings returns the settings of a Redis connection (address, username, password, database) writing
// into c, with environment variables under prefix; the address can also come from REDIS_ADDR. addrUsage says
// what the service uses Redis for.
func RedisSettings(c *Redis, prefix, addrUsage string) []Setting {
	return []Setting{
		{Name: "redis-addr", Envs: []string{"REDIS_ADDR", EnvName(prefix, "redis-addr")}, Usage: addrUsage, Value: String(&c.Addr)},
		{Name: "redis-username", Envs: []string{EnvName(prefix, "redis-username")}, Usage: "Redis username (ACL); empty means none", Value: String(&c.Username)},
		{
			Name: "redis-password", Envs: []string{EnvName(prefix, "redis-password")}, Group: "redis-password", NoFlag: true,
			Usage: "Redis password", Value: String(&c.Password),
		},
		{
			Name: "redis-password-file", Envs: []string{EnvName(prefix, "redis-password-file")}, Group: "redis-password",
			Usage: "file holding the Redis password, read again when it changes", Value: SecretFile(&c.PasswordFile),
		},
		{Name: "redis-db", Envs: []string{EnvName(prefix, "redis-db")}, Usage: "Redis database number", Value: Int(&c.DB)},
	}
}

// OTLPEndpoint returns the otlp-endpoint setting writing into p, with its environment variable under prefix;
// OTEL_EXPORTER_OTLP_ENDPOINT, the variable every OpenTelemetry SDK reads, sets it too.
func OTLPEndpoint(p *string, prefix string) Setting {
	return Setting{
		Name:  "otlp-endpoint",
		Envs:  []string{EnvName(prefix, "otlp-endpoint"), "OTEL_EXPORTER_OTLP_ENDPOINT"},
		Usage: "OTLP/HTTP collector to export spans to (http://collector:4318); empty means tracing is off",
		Value: String(p),
	}
}

// Options are what Load needs besides the settings.
type Options struct {
	// Program names the flag set in messages.
	Program string
	// ConfigUsage describes the --config flag.
	ConfigUsage string
	// ExtraKeys are YAML keys that are not settings but which the caller reads from the returned file map
	// (for example a list of sources). Other unknown keys are errors.
	ExtraKeys []string
	// OtherKeys lets the file hold keys that are none of the settings and not in ExtraKeys, and ignores them:
	// for a tool that reads its few settings from a service's own file.
	OtherKeys bool
	// Rest, when not nil, gets the arguments after the flags (the flag set stops at the first argument that is
	// not a flag); nil refuses any.
	Rest *[]string
	// Out receives usage and flag errors.
	Out io.Writer
}

// Load applies args (without the program name), the environment (getenv) and the YAML file named by
// --config to ss, strongest first: a flag, then an environment variable, then the file; what none sets keeps
// the value it had. It returns the file's top-level keys, for the caller's ExtraKeys. Errors name the
// setting and the source at fault.
func Load(ss []Setting, args []string, getenv func(string) string, o Options) (map[string]any, error) {
	fs := flag.NewFlagSet(o.Program, flag.ContinueOnError)
	fs.SetOutput(o.Out)
	configFile := fs.String("config", "", o.ConfigUsage)
	var refused error // a NoFlag setting given as a flag
	for _, s := range ss {
		if s.NoFlag {
			// Registered only to say why it is refused, rather than "flag provided but not defined"; the error
			// is made here, not by the flag package, whose message would quote the secret.
			fs.Var(refusedFlag{s, ss, &refused}, s.Name, "not a flag: "+s.Usage+" (env "+strings.Join(s.Envs, " or ")+", or the config file)")
			continue
		}
		if s.FlagOnly {
			fs.Var(s.Value, s.Name, s.Usage+" (flag only)")
			continue
		}
		fs.Var(s.Value, s.Name, s.Usage+" (env "+strings.Join(s.Envs, " or ")+")")
	}
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if refused != nil {
		return nil, refused
	}
	if fs.NArg() > 0 && o.Rest == nil {
		return nil, fmt.Errorf("unexpected argument %q (settings are flags: --name=value)", fs.Arg(0))
	}
	if o.Rest != nil {
		*o.Rest = fs.Args()
	}
	fromFlag := map[string]bool{} // by group
	fs.Visit(func(f *flag.Flag) {
		for _, s := range ss {
			if s.Name == f.Name {
				fromFlag[s.group()] = true
			}
		}
	})

	file := map[string]any{}
	if *configFile != "" {
		data, err := os.ReadFile(*configFile)
		if err != nil {
			return nil, fmt.Errorf("config file: %w", err)
		}
		if err := yaml.Unmarshal(data, &file); err != nil {
			return nil, fmt.Errorf("config file %s: %s", *configFile, oneLine(err.Error()))
		}
		for k := range file {
			if !o.OtherKeys && !slices.Contains(o.ExtraKeys, k) && !slices.ContainsFunc(ss, func(s Setting) bool { return s.Name == k && !s.FlagOnly }) {
				return nil, fmt.Errorf("config file %s: unknown setting %q", *configFile, k)
			}
		}
	}
	// The environment first, then the file, each skipping groups that a stronger source already set.
	fromEnv := map[string]bool{}
	for _, s := range ss {
		if fromFlag[s.group()] || s.FlagOnly {
			continue
		}
		if env, v := firstEnv(s.Envs, getenv); env != "" {
			if err := s.Value.Set(v); err != nil {
				return nil, fmt.Errorf("setting %s from %s: %w", s.Name, env, err)
			}
			fromEnv[s.group()] = true
		}
	}
	for _, s := range ss {
		raw, ok := file[s.Name]
		if !ok || s.FlagOnly || fromFlag[s.group()] || fromEnv[s.group()] {
			continue
		}
		_, mapOK := s.Value.(interface{ acceptsMap() })
		v, err := scalar(raw, mapOK)
		if err == nil {
			err = s.Value.Set(v)
		}
		if err != nil {
			return nil, fmt.Errorf("setting %s from config file %s: %w", s.Name, *configFile, err)
		}
	}
	return file, nil
}

// refusedFlag stands for a NoFlag setting on the command line: setting it records, in *err, an error saying
// where the value goes instead. The value is dropped.
type refusedFlag struct {
	s   Setting
	ss  []Setting
	err *error
}

func (r refusedFlag) String() string { return "" }

func (r refusedFlag) Set(string) error {
	where := strings.Join(r.s.Envs, " or ")
	for _, o := range r.ss {
		if o.group() == r.s.group() && o.Name != r.s.Name && !o.NoFlag {
			where += ", or --" + o.Name // the file form of a secret
		}
	}
	if *r.err == nil {
		*r.err = fmt.Errorf("--%s: a secret is not taken from the command line, which process lists show: set %s (or %s in the config file)",
			r.s.Name, where, r.s.Name)
	}
	return nil
}

// oneLine keeps the first line of a multi-line message (the YAML library adds an annotated excerpt).
func oneLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return strings.TrimSpace(s[:i])
	}
	return s
}

func firstEnv(names []string, getenv func(string) string) (string, string) {
	for _, n := range names {
		if v := getenv(n); v != "" {
			return n, v
		}
	}
	return "", ""
}

// scalar turns a YAML value into the text a flag would have held; a list becomes a comma list. A map is
// accepted only for a Map setting (mapOK set): it becomes a comma list of key=value pairs, in key order.
func scalar(v any, mapOK bool) (string, error) {
	switch x := v.(type) {
	case nil:
		return "", nil
	case string:
		return x, nil
	case []any:
		parts := make([]string, len(x))
		for i, e := range x {
			s, err := scalar(e, false)
			if err != nil {
				return "", err
			}
			parts[i] = s
		}
		return strings.Join(parts, ","), nil
	case map[string]any:
		if !mapOK {
			return "", errors.New("want a single value or a list, got a map")
		}
		pairs := make([]string, 0, len(x))
		for _, k := range slices.Sorted(maps.Keys(x)) {
			s, err := scalar(x[k], false)
			if _, isList := x[k].([]any); err != nil || isList {
				return "", fmt.Errorf("want a map of single values, got %q: %v", k, x[k])
			}
			pairs = append(pairs, k+"="+s)
		}
		return strings.Join(pairs, ","), nil
	default:
		return fmt.Sprint(x), nil
	}
}
