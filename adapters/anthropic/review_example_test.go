package anthropicadapter_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The example's server refuses a tool_use left unanswered, in the middle
// of a request or at its end, as the API does, and takes the same turn
// answered.
func TestReviewFakeServerRefusesUnanswered(t *testing.T) {
	srv := httptest.NewServer(fakeMessages())
	defer srv.Close()
	client := anthropic.NewClient(option.WithBaseURL(srv.URL), option.WithAPIKey("test"), option.WithMaxRetries(0))
	q := anthropic.NewUserMessage(anthropic.NewTextBlock("q"))
	use := anthropic.NewAssistantMessage(anthropic.NewThinkingBlock("sig-1", "t"), anthropic.NewToolUseBlock("toolu_1", map[string]any{}, "read_file"))
	answer := anthropic.NewUserMessage(anthropic.NewToolResultBlock("toolu_1", "x", false))
	send := func(msgs ...anthropic.MessageParam) error {
		_, err := client.Messages.New(context.Background(), anthropic.MessageNewParams{Model: "claude-test", MaxTokens: 10, Messages: msgs})
		return err
	}
	for name, msgs := range map[string][]anthropic.MessageParam{
		"unanswered, then the user": {q, use, anthropic.NewUserMessage(anthropic.NewTextBlock("r"))},
		"unanswered at the end":     {q, use},
	} {
		err := send(msgs...)
		var apiErr *anthropic.Error
		require.True(t, errors.As(err, &apiErr), "%s: %v", name, err)
		assert.Equal(t, http.StatusBadRequest, apiErr.StatusCode, name)
	}
	assert.NoError(t, send(q, use, answer))
}
