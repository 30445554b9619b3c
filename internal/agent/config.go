package agent

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/BurntSushi/toml"
)

// Providers, by the value of [agent] provider.
const (
	ProviderOpenAICompatible = "openai-compatible"
	ProviderOpenAI           = "openai"
	ProviderAnthropic        = "anthropic"
	ProviderOpenRouter       = "openrouter"
	ProviderGemini           = "gemini"
)

// Providers lists the provider values in the order docs name them.
var providers = []string{ProviderOpenAICompatible, ProviderOpenAI, ProviderAnthropic, ProviderOpenRouter, ProviderGemini}

// Defaults.
const (
	// DefaultBaseURL is Ollama's OpenAI-compatible endpoint: the default
	// provider is a model on the operator's own machine.
	DefaultBaseURL  = "http://localhost:11434/v1"
	DefaultMaxSteps = 25
	maxMaxSteps     = 500
)

// Config is the [agent] table of config.toml:
//
//	[agent]
//	provider = "openai-compatible"   # openai, anthropic, openrouter, gemini
//	model = "qwen2.5-coder:14b"
//	base_url = "http://localhost:11434/v1"
//	api_key_env = "OPENAI_API_KEY"   # the variable that holds the key
//	max_steps = 25
//	context_window = 32768           # tokens; older turns are summarised as it fills
//	allow = ["systemctl status", "df"]   # commands that run without asking
//	deny = ["rm -rf*", "*reboot*"]       # commands that always ask
//
// The API key itself is never in the file: only the name of the
// environment variable that holds it.
type Config struct {
	Provider      string `toml:"provider"`
	Model         string `toml:"model"`
	BaseURL       string `toml:"base_url"`
	APIKeyEnv     string `toml:"api_key_env"`
	MaxSteps      int    `toml:"max_steps"`
	ContextWindow int    `toml:"context_window"`
	// Allow are command prefixes bash may run without asking; Deny are
	// glob patterns of commands that always ask.
	Allow []string `toml:"allow"`
	Deny  []string `toml:"deny"`
}

// ConfigFile is where the [agent] table lives, in rex's config directory.
const ConfigFile = "config.toml"

// LoadConfig reads the [agent] table of dir/config.toml; the rest of the
// file is the console's. A missing file or table is the zero Config.
func LoadConfig(dir string) (Config, error) {
	path := filepath.Join(dir, ConfigFile)
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return Config{}, nil
	}
	if err != nil {
		return Config{}, fmt.Errorf("read %s: %w", path, err)
	}
	var file struct {
		Agent toml.Primitive `toml:"agent"`
	}
	md, err := toml.Decode(string(data), &file)
	if err != nil {
		return Config{}, fmt.Errorf("%s: %w", path, err)
	}
	var c Config
	if err := md.PrimitiveDecode(file.Agent, &c); err != nil {
		return Config{}, fmt.Errorf("%s: [agent]: %w", path, err)
	}
	for _, k := range md.Undecoded() {
		if len(k) > 1 && k[0] == "agent" {
			return Config{}, fmt.Errorf("%s: unknown setting %q in [agent]; the settings are provider, model, base_url, api_key_env, max_steps, context_window, allow and deny", path, k[1])
		}
	}
	if err := c.Check(); err != nil {
		return Config{}, fmt.Errorf("%s: %w", path, err)
	}
	return c, nil
}

// Check validates the values that are set.
func (c Config) Check() error {
	if c.Provider != "" && !validProvider(c.Provider) {
		return fmt.Errorf("[agent] provider %q: use one of %s", c.Provider, strings.Join(providers, ", "))
	}
	if c.MaxSteps < 0 || c.MaxSteps > maxMaxSteps {
		return fmt.Errorf("[agent] max_steps %d: use a number from 1 to %d", c.MaxSteps, maxMaxSteps)
	}
	if c.ContextWindow < 0 || c.ContextWindow > 0 && c.ContextWindow < 1024 {
		return fmt.Errorf("[agent] context_window %d: use the model's window in tokens (at least 1024)", c.ContextWindow)
	}
	if c.APIKeyEnv != "" && strings.ContainsAny(c.APIKeyEnv, "= \t\n$") {
		return fmt.Errorf("[agent] api_key_env %q is not the name of an environment variable; write the variable's name, never the key", c.APIKeyEnv)
	}
	return nil
}

func validProvider(p string) bool {
	for _, v := range providers {
		if v == p {
			return true
		}
	}
	return false
}

// Overrides are the command line's --provider, --model and --base-url.
type Overrides struct {
	Provider, Model, BaseURL string
}

// With returns c with the overrides that are set applied, and the
// defaults filled in.
func (c Config) With(o Overrides) Config {
	if o.Provider != "" {
		c.Provider = o.Provider
	}
	if o.Model != "" {
		c.Model = o.Model
	}
	if o.BaseURL != "" {
		c.BaseURL = o.BaseURL
	}
	if c.Provider == "" {
		c.Provider = ProviderOpenAICompatible
	}
	if c.BaseURL == "" && c.Provider == ProviderOpenAICompatible {
		c.BaseURL = DefaultBaseURL
	}
	if c.APIKeyEnv == "" {
		c.APIKeyEnv = defaultKeyEnv(c.Provider)
	}
	if c.MaxSteps == 0 {
		c.MaxSteps = DefaultMaxSteps
	}
	return c
}

// defaultKeyEnv is the variable each provider's own tools read.
func defaultKeyEnv(provider string) string {
	switch provider {
	case ProviderOpenAI:
		return "OPENAI_API_KEY"
	case ProviderAnthropic:
		return "ANTHROPIC_API_KEY"
	case ProviderOpenRouter:
		return "OPENROUTER_API_KEY"
	case ProviderGemini:
		return "GEMINI_API_KEY"
	}
	return "" // a local server needs none
}

// ErrNotConfigured says in one sentence how to configure a model.
var ErrNotConfigured = errors.New(`no agent model is configured: add an [agent] table to ~/.config/rex/config.toml with at least model = "NAME" (for Ollama: provider = "openai-compatible", base_url = "http://localhost:11434/v1"), or pass --model`)

// Ready checks that a model can be asked: one is named, the provider is
// known, and a hosted provider's key variable is set.
func (c Config) Ready(getenv func(string) string) error {
	if err := c.Check(); err != nil {
		return err
	}
	if c.Model == "" {
		return ErrNotConfigured
	}
	if c.APIKeyEnv != "" && getenv(c.APIKeyEnv) == "" && c.Provider != ProviderOpenAICompatible {
		return fmt.Errorf("the %s provider needs an API key: set the environment variable %s (or name another with [agent] api_key_env)", c.Provider, c.APIKeyEnv)
	}
	if c.Provider == ProviderOpenRouter && c.BaseURL != "" {
		return errors.New("[agent] base_url does not apply to openrouter, whose address is fixed; remove it, or use provider = \"openai-compatible\" for another server")
	}
	return nil
}
