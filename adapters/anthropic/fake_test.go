package anthropicadapter_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/sessionstore/sessionstore"
	anthropicadapter "github.com/sessionstore/sessionstore/adapters/anthropic"
	"github.com/sessionstore/sessionstore/convo"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The example's server refuses the requests the adapter must not make, so
// the example's passing means something: a turn whose thinking was left
// out or forged, and a result without its call.
func TestFakeServerRefuses(t *testing.T) {
	srv := httptest.NewServer(fakeMessages())
	defer srv.Close()
	client := anthropic.NewClient(option.WithBaseURL(srv.URL), option.WithAPIKey("test"), option.WithMaxRetries(0))
	turn := []sessionstore.Event{
		sessionstore.UserText("q"),
		sessionstore.AssistantMessage(sessionstore.Message{ToolCalls: []sessionstore.ToolCall{{CallID: "toolu_1", Name: "read_file"}}}),
		sessionstore.ToolCallEvent(sessionstore.ToolCall{CallID: "toolu_1", Name: "read_file"}),
		sessionstore.ToolResultEvent(sessionstore.ToolResult{CallID: "toolu_1", Output: "x"}),
	}
	c, err := convo.Build(turn, nil)
	require.NoError(t, err)
	unsigned := anthropicadapter.MessagesOf(c)
	orphan := []anthropic.MessageParam{
		anthropic.NewUserMessage(anthropic.NewTextBlock("q")),
		anthropic.NewAssistantMessage(anthropic.NewTextBlock("a")),
		anthropic.NewUserMessage(anthropic.NewToolResultBlock("toolu_9", "x", false)),
	}
	same := []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("q")), anthropic.NewUserMessage(anthropic.NewTextBlock("r"))}
	forged := []anthropic.MessageParam{
		anthropic.NewUserMessage(anthropic.NewTextBlock("q")),
		anthropic.NewAssistantMessage(anthropic.NewThinkingBlock("sig-forged", "t"), anthropic.NewToolUseBlock("toolu_1", map[string]any{}, "read_file")),
		anthropic.NewUserMessage(anthropic.NewToolResultBlock("toolu_1", "x", false)),
	}
	for name, msgs := range map[string][]anthropic.MessageParam{"unsigned": unsigned, "forged": forged, "orphan": orphan, "same role": same} {
		_, err := client.Messages.New(context.Background(), anthropic.MessageNewParams{Model: "claude-test", MaxTokens: 10, Messages: msgs})
		var apiErr *anthropic.Error
		require.True(t, errors.As(err, &apiErr), "%s: %v", name, err)
		assert.Equal(t, http.StatusBadRequest, apiErr.StatusCode, name)
	}
	// The same turn with the thinking the server signed is taken.
	signed := []anthropic.MessageParam{forged[0],
		anthropic.NewAssistantMessage(anthropic.NewThinkingBlock("sig-1", "t"), anthropic.NewToolUseBlock("toolu_1", map[string]any{}, "read_file")), forged[2]}
	_, err = client.Messages.New(context.Background(), anthropic.MessageNewParams{Model: "claude-test", MaxTokens: 10, Messages: signed})
	assert.NoError(t, err)
}
