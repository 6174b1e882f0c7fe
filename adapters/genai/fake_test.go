package genai_test

import (
	"context"
	"errors"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/genai"
)

// The example's server refuses a function call turn without its thought
// signature, as Gemini 3 does, so the example passes only because the
// signature is sent back; it takes the signature it gave and the
// documented placeholder.
func TestGeminiServerRefusesUnsigned(t *testing.T) {
	var seen []string
	srv := geminiServer(&seen)
	defer srv.Close()
	ctx := context.Background()
	client, err := genai.NewClient(ctx, &genai.ClientConfig{APIKey: "test", Backend: genai.BackendGeminiAPI, HTTPOptions: genai.HTTPOptions{BaseURL: srv.URL}})
	require.NoError(t, err)
	turn := func(sig string) []*genai.Content {
		call := &genai.Part{FunctionCall: &genai.FunctionCall{Name: "read_file", Args: map[string]any{"path": "go.mod"}}}
		if sig != "" {
			call.ThoughtSignature = []byte(sig)
		}
		return []*genai.Content{
			{Role: genai.RoleUser, Parts: []*genai.Part{{Text: "What is in go.mod?"}}},
			{Role: genai.RoleModel, Parts: []*genai.Part{call}},
			{Role: genai.RoleUser, Parts: []*genai.Part{{FunctionResponse: &genai.FunctionResponse{Name: "read_file", Response: map[string]any{"output": "x"}}}}},
		}
	}
	for name, sig := range map[string]string{"unsigned": "", "forged": "sig-2"} {
		_, err := client.Models.GenerateContent(ctx, "gemini-3-flash", turn(sig), nil)
		var apiErr genai.APIError
		require.True(t, errors.As(err, &apiErr), "%s: %v", name, err)
		assert.Equal(t, http.StatusBadRequest, apiErr.Code, name)
		assert.Contains(t, apiErr.Message, "missing a thought_signature", name)
	}
	for _, sig := range []string{"sig-1", "skip_thought_signature_validator"} {
		_, err := client.Models.GenerateContent(ctx, "gemini-3-flash", turn(sig), nil)
		assert.NoError(t, err, sig)
	}
}
