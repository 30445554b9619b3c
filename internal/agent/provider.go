package agent

import (
	"context"
	"fmt"
	"net/http"

	"charm.land/fantasy"
	"charm.land/fantasy/providers/anthropic"
	"charm.land/fantasy/providers/google"
	"charm.land/fantasy/providers/openai"
	"charm.land/fantasy/providers/openaicompat"
	"charm.land/fantasy/providers/openrouter"
	"github.com/openai/openai-go/v3/option"

	"github.com/rexconsole/rex/internal/version"
)

// openAIURL is where the openai provider goes when base_url is not set.
// It is set explicitly so that OPENAI_BASE_URL in the environment never
// decides where a key is sent.
const openAIURL = "https://api.openai.com/v1"

// NewModel connects the configured provider and model. The API key is read
// from the environment variable c.APIKeyEnv here and handed to the
// provider's client; rex keeps it nowhere else. client may be nil.
func NewModel(ctx context.Context, c Config, getenv func(string) string, client *http.Client) (fantasy.LanguageModel, error) {
	if err := c.Ready(getenv); err != nil {
		return nil, err
	}
	key := ""
	if c.APIKeyEnv != "" {
		key = getenv(c.APIKeyEnv)
	}
	ua := "rex/" + version.Version
	var (
		p   fantasy.Provider
		err error
	)
	switch c.Provider {
	case ProviderOpenAICompatible:
		// Without a key, none is sent: OPENAI_API_KEY (or an admin key)
		// from the environment must never reach a server it was not
		// meant for.
		opts := []openaicompat.Option{openaicompat.WithBaseURL(c.BaseURL), openaicompat.WithUserAgent(ua),
			openaicompat.WithSDKOptions(option.WithAdminAPIKey(""), option.WithAPIKey(key))}
		if client != nil {
			opts = append(opts, openaicompat.WithHTTPClient(client))
		}
		p, err = openaicompat.New(opts...)
	case ProviderOpenAI:
		base := c.BaseURL
		if base == "" {
			base = openAIURL
		}
		opts := []openai.Option{openai.WithBaseURL(base), openai.WithAPIKey(key), openai.WithUserAgent(ua),
			openai.WithSDKOptions(option.WithAdminAPIKey(""), option.WithAPIKey(key))}
		if client != nil {
			opts = append(opts, openai.WithHTTPClient(client))
		}
		p, err = openai.New(opts...)
	case ProviderAnthropic:
		opts := []anthropic.Option{anthropic.WithAPIKey(key), anthropic.WithUserAgent(ua)}
		if c.BaseURL != "" {
			opts = append(opts, anthropic.WithBaseURL(c.BaseURL))
		}
		if client != nil {
			opts = append(opts, anthropic.WithHTTPClient(client))
		}
		p, err = anthropic.New(opts...)
	case ProviderOpenRouter:
		opts := []openrouter.Option{openrouter.WithAPIKey(key), openrouter.WithUserAgent(ua)}
		if client != nil {
			opts = append(opts, openrouter.WithHTTPClient(client))
		}
		p, err = openrouter.New(opts...)
	case ProviderGemini:
		opts := []google.Option{google.WithGeminiAPIKey(key), google.WithUserAgent(ua)}
		if c.BaseURL != "" {
			opts = append(opts, google.WithBaseURL(c.BaseURL))
		}
		if client != nil {
			opts = append(opts, google.WithHTTPClient(client))
		}
		p, err = google.New(opts...)
	default:
		return nil, fmt.Errorf("[agent] provider %q is not supported", c.Provider)
	}
	if err != nil {
		return nil, fmt.Errorf("set up the %s provider: %w", c.Provider, err)
	}
	m, err := p.LanguageModel(ctx, c.Model)
	if err != nil {
		return nil, fmt.Errorf("set up model %s of %s: %w", c.Model, c.Provider, err)
	}
	return m, nil
}
