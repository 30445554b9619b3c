package agent

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestLoadConfig(t *testing.T) {
	dir := t.TempDir()
	write := func(s string) {
		if err := os.WriteFile(filepath.Join(dir, ConfigFile), []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	c, err := LoadConfig(dir)
	if err != nil || c.Model != "" {
		t.Fatalf("no file: %+v %v", c, err)
	}
	write("theme = \"dark\"\n[keys]\nzoom = [\"f2\"]\n[agent]\nprovider = \"anthropic\"\nmodel = \"claude-x\"\napi_key_env = \"MY_KEY\"\nmax_steps = 10\ncontext_window = 200000\nallow = [\"df\"]\ndeny = [\"rm -rf\"]\n")
	c, err = LoadConfig(dir)
	if err != nil || c.Provider != "anthropic" || c.Model != "claude-x" || c.APIKeyEnv != "MY_KEY" || c.MaxSteps != 10 ||
		c.ContextWindow != 200000 || c.Allow[0] != "df" || c.Deny[0] != "rm -rf" {
		t.Fatalf("config %+v %v", c, err)
	}
	for text, want := range map[string]string{
		"[agent]\nprovider = \"llama\"\n":       "use one of openai-compatible, openai, anthropic, openrouter, gemini",
		"[agent]\napi_key = \"sk-123\"\n":       `unknown setting "api_key" in [agent]`,
		"[agent]\napi_key_env = \"sk-abc=1\"\n": "not the name of an environment variable",
		"[agent]\nmax_steps = -1\n":             "max_steps",
		"[agent]\ncontext_window = 10\n":        "context_window",
		"[agent]\nmodel = \n":                   "config.toml",
	} {
		write(text)
		if _, err := LoadConfig(dir); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want %q", text, err, want)
		}
	}
}

func TestConfigDefaultsAndReady(t *testing.T) {
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	c := Config{}.With(Overrides{})
	if c.Provider != ProviderOpenAICompatible || c.BaseURL != DefaultBaseURL || c.MaxSteps != DefaultMaxSteps || c.APIKeyEnv != "" {
		t.Errorf("defaults %+v", c)
	}
	if err := c.Ready(env(nil)); err != ErrNotConfigured {
		t.Errorf("no model: %v", err)
	}
	if !strings.Contains(ErrNotConfigured.Error(), "[agent]") || strings.Count(ErrNotConfigured.Error(), ". ") > 0 {
		t.Errorf("not one sentence: %v", ErrNotConfigured)
	}
	c = Config{Model: "llama3.1"}.With(Overrides{})
	if err := c.Ready(env(nil)); err != nil {
		t.Errorf("a local model needs no key: %v", err)
	}
	c = Config{Model: "x", BaseURL: "http://a"}.With(Overrides{Provider: "openai", Model: "gpt-x", BaseURL: "http://b"})
	if c.Provider != "openai" || c.Model != "gpt-x" || c.BaseURL != "http://b" || c.APIKeyEnv != "OPENAI_API_KEY" {
		t.Errorf("overrides %+v", c)
	}
	if err := c.Ready(env(nil)); err == nil || !strings.Contains(err.Error(), "set the environment variable OPENAI_API_KEY") {
		t.Errorf("missing key: %v", err)
	}
	if err := c.Ready(env(map[string]string{"OPENAI_API_KEY": "k"})); err != nil {
		t.Errorf("with key: %v", err)
	}
	for p, k := range map[string]string{"anthropic": "ANTHROPIC_API_KEY", "openrouter": "OPENROUTER_API_KEY", "gemini": "GEMINI_API_KEY"} {
		if got := (Config{Provider: p}).With(Overrides{}).APIKeyEnv; got != k {
			t.Errorf("%s reads %s, want %s", p, got, k)
		}
	}
}

func TestNewModelForEveryProvider(t *testing.T) {
	getenv := func(string) string { return "k" }
	for _, p := range providers {
		c := Config{Provider: p, Model: "m"}.With(Overrides{})
		m, err := NewModel(t.Context(), c, getenv, nil)
		if err != nil {
			t.Errorf("%s: %v", p, err)
			continue
		}
		if m.Model() != "m" || m.Provider() == "" {
			t.Errorf("%s: model %q of %q", p, m.Model(), m.Provider())
		}
	}
	if _, err := NewModel(t.Context(), Config{}.With(Overrides{}), getenv, nil); err != ErrNotConfigured {
		t.Errorf("unconfigured: %v", err)
	}
}
