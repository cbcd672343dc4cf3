package settings

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

type conf struct {
	Name     string
	Every    time.Duration
	Secret   string
	Sections []string
	// SecretFile is the path of secret-file.
	SecretFile string
}

func (c *conf) settings() []Setting {
	return []Setting{
		{Name: "name", Envs: []string{"T_NAME"}, Value: String(&c.Name)},
		{Name: "every", Envs: []string{"T_EVERY"}, Value: Duration(&c.Every)},
		{Name: "secret", Envs: []string{"T_SECRET"}, Value: String(&c.Secret), Group: "secret"},
		{Name: "secret-file", Envs: []string{"T_SECRET_FILE"}, Value: SecretFile(&c.SecretFile), Group: "secret"},
		{Name: "sections", Envs: []string{"T_SECTIONS"}, Value: List(&c.Sections)},
	}
}

func TestLoadPrecedence(t *testing.T) {
	dir := t.TempDir()
	secretFile := filepath.Join(dir, "secret")
	if err := os.WriteFile(secretFile, []byte("from-file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	yamlFile := filepath.Join(dir, "c.yaml")
	if err := os.WriteFile(yamlFile, []byte("name: yaml\nevery: 3s\nsections: [a, b]\nsecret-file: "+secretFile+"\nextra: [1]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		args []string
		env  map[string]string
		want conf
	}{
		{"file only", []string{"--config", yamlFile}, nil, conf{"yaml", 3 * time.Second, "", []string{"a", "b"}, secretFile}},
		{
			"env beats file",
			[]string{"--config", yamlFile},
			map[string]string{"T_NAME": "env", "T_SECRET": "env-secret"},
			conf{"env", 3 * time.Second, "env-secret", []string{"a", "b"}, ""},
		},
		{
			"flag beats env",
			[]string{"--config", yamlFile, "--name=flag", "--secret=flag-secret"},
			map[string]string{"T_NAME": "env", "T_SECRET_FILE": secretFile},
			conf{"flag", 3 * time.Second, "flag-secret", []string{"a", "b"}, ""},
		},
		{"defaults kept", nil, nil, conf{Name: "default", Every: time.Second}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := conf{Name: "default", Every: time.Second}
			file, err := Load(c.settings(), tc.args, func(k string) string { return tc.env[k] }, Options{ExtraKeys: []string{"extra"}, Out: io.Discard})
			if err != nil {
				t.Fatal(err)
			}
			if c.Name != tc.want.Name || c.Every != tc.want.Every || c.Secret != tc.want.Secret || c.SecretFile != tc.want.SecretFile || strings.Join(c.Sections, ",") != strings.Join(tc.want.Sections, ",") {
				t.Fatalf("got %+v, want %+v", c, tc.want)
			}
			if len(tc.args) > 0 && file["extra"] == nil {
				t.Fatal("the extra key is not returned")
			}
		})
	}
}

func TestLoadErrorsNameTheSetting(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte("nope: 1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		args []string
		env  map[string]string
		want string
	}{
		{"bad env value", nil, map[string]string{"T_EVERY": "soon"}, "setting every from T_EVERY"},
		{"bad flag value", []string{"--every=soon"}, nil, "every"},
		{"unknown key", []string{"--config", bad}, nil, `unknown setting "nope"`},
		{"positional", []string{"x"}, nil, `unexpected argument "x"`},
		{"missing file", []string{"--config", filepath.Join(dir, "none.yaml")}, nil, "config file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var c conf
			_, err := Load(c.settings(), tc.args, func(k string) string { return tc.env[k] }, Options{Out: io.Discard})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want it to contain %q", err, tc.want)
			}
		})
	}
}

func TestFlagOnly(t *testing.T) {
	var v string
	ss := []Setting{{Name: "url", Envs: []string{"T_URL"}, Value: String(&v), FlagOnly: true}}
	getenv := func(k string) string { return map[string]string{"T_URL": "from-env"}[k] }
	if _, err := Load(ss, nil, getenv, Options{Program: "t", Out: io.Discard}); err != nil || v != "" {
		t.Fatalf("environment: value %q, err %v; want it ignored", v, err)
	}
	if _, err := Load(ss, []string{"--url", "from-flag"}, getenv, Options{Program: "t", Out: io.Discard}); err != nil || v != "from-flag" {
		t.Fatalf("flag: value %q, err %v", v, err)
	}
	yamlFile := filepath.Join(t.TempDir(), "c.yaml")
	if err := os.WriteFile(yamlFile, []byte("url: from-file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := Load(ss, []string{"--config", yamlFile}, getenv, Options{Program: "t", Out: io.Discard})
	if err == nil || !strings.Contains(err.Error(), `unknown setting "url"`) {
		t.Fatalf("file key of a flag-only setting: error %v, want unknown setting", err)
	}
}

// TestNoFlag: a NoFlag setting (a secret) comes from the environment or the file; given as a flag it is an error
// that says where it goes instead, its environment variable and its file form.
func TestNoFlag(t *testing.T) {
	var v, path string
	ss := []Setting{
		{Name: "token", Envs: []string{"T_TOKEN"}, Value: String(&v), NoFlag: true, Group: "token"},
		{Name: "token-file", Envs: []string{"T_TOKEN_FILE"}, Value: SecretFile(&path), Group: "token"},
	}
	for _, args := range [][]string{{"--token", "from-flag"}, {"-token=from-flag"}} {
		var out strings.Builder
		_, err := Load(ss, args, func(string) string { return "" }, Options{Program: "t", Out: &out})
		if err == nil || v != "" || !strings.Contains(err.Error(), "set T_TOKEN, or --token-file") || !strings.Contains(err.Error(), "process lists") {
			t.Fatalf("%v: value %q, error %v; want an error naming T_TOKEN and --token-file", args, v, err)
		}
		if strings.Contains(err.Error()+out.String(), "from-flag") {
			t.Fatalf("%v: the error or the output quotes the secret: %v %s", args, err, out.String())
		}
	}
	getenv := func(k string) string { return map[string]string{"T_TOKEN": "from-env"}[k] }
	if _, err := Load(ss, nil, getenv, Options{Program: "t", Out: io.Discard}); err != nil || v != "from-env" {
		t.Fatalf("environment: value %q, err %v", v, err)
	}
	yamlFile := filepath.Join(t.TempDir(), "c.yaml")
	if err := os.WriteFile(yamlFile, []byte("token: from-file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(ss, []string{"--config", yamlFile}, func(string) string { return "" }, Options{Program: "t", Out: io.Discard}); err != nil || v != "from-file" {
		t.Fatalf("file: value %q, err %v", v, err)
	}
}

// TestSecretFile: a -file setting holds the path after reading the file once: a missing or empty file is an
// error at load naming the setting and the path.
func TestSecretFile(t *testing.T) {
	dir := t.TempDir()
	good, empty := filepath.Join(dir, "good"), filepath.Join(dir, "empty")
	if err := os.WriteFile(good, []byte("pw\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(empty, []byte("\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		path, want string
	}{
		{good, ""},
		{filepath.Join(dir, "missing"), "setting token-file from T_TOKEN_FILE: file " + dir + "/missing: no such file"},
		{empty, "empty"},
	} {
		var path string
		ss := []Setting{{Name: "token-file", Envs: []string{"T_TOKEN_FILE"}, Value: SecretFile(&path)}}
		_, err := Load(ss, nil, func(k string) string { return map[string]string{"T_TOKEN_FILE": tc.path}[k] }, Options{Program: "t", Out: io.Discard})
		if tc.want == "" && (err != nil || path != tc.path) || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Fatalf("%s: path %q, error %v; want %q", tc.path, path, err, tc.want)
		}
	}
}
