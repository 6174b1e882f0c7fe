package openaiadapter_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The examples' servers refuse a call left without its result, as the
// APIs do, and a Chat tool message that does not follow its call's
// assistant message; they take the same turns answered.
func TestReviewFakeServersRefuseUnanswered(t *testing.T) {
	refused := func(t *testing.T, name string, err error) {
		var apiErr *openai.Error
		require.True(t, errors.As(err, &apiErr), "%s: %v", name, err)
		assert.Equal(t, http.StatusBadRequest, apiErr.StatusCode, name)
	}
	t.Run("chat", func(t *testing.T) {
		srv := httptest.NewServer(fakeChat())
		defer srv.Close()
		client := openai.NewClient(option.WithBaseURL(srv.URL), option.WithAPIKey("test"), option.WithMaxRetries(0))
		call := openai.ChatCompletionMessageParamUnion{OfAssistant: &openai.ChatCompletionAssistantMessageParam{
			ToolCalls: []openai.ChatCompletionMessageToolCallUnionParam{{OfFunction: &openai.ChatCompletionMessageFunctionToolCallParam{
				ID: "call_1", Function: openai.ChatCompletionMessageFunctionToolCallFunctionParam{Name: "read_file", Arguments: "{}"},
			}}},
		}}
		send := func(msgs ...openai.ChatCompletionMessageParamUnion) error {
			_, err := client.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{Model: "gpt-test", Messages: msgs})
			return err
		}
		q, answer := openai.UserMessage("q"), openai.ToolMessage("x", "call_1")
		refused(t, "unanswered, then the user", send(q, call, openai.UserMessage("r")))
		refused(t, "unanswered at the end", send(q, call))
		refused(t, "answered after the user", send(q, call, openai.UserMessage("r"), answer))
		assert.NoError(t, send(q, call, answer))
	})
	t.Run("responses", func(t *testing.T) {
		srv := httptest.NewServer(fakeResponses())
		defer srv.Close()
		client := openai.NewClient(option.WithBaseURL(srv.URL), option.WithAPIKey("test"), option.WithMaxRetries(0))
		// call_7 is a call of no reasoning (the server's call_1 wants its
		// reasoning item, see TestFakeResponsesRefusesWithoutReasoning).
		call := responses.ResponseInputItemUnionParam{OfFunctionCall: &responses.ResponseFunctionToolCallParam{CallID: "call_7", Name: "read_file", Arguments: "{}"}}
		output := responses.ResponseInputItemUnionParam{OfFunctionCallOutput: &responses.ResponseInputItemFunctionCallOutputParam{
			CallID: openai.String("call_7"), Output: responses.ResponseInputItemFunctionCallOutputOutputUnionParam{OfString: openai.String("x")},
		}}
		send := func(items ...responses.ResponseInputItemUnionParam) error {
			_, err := client.Responses.New(context.Background(), responses.ResponseNewParams{Model: "gpt-test", Input: responses.ResponseNewParamsInputUnion{OfInputItemList: items}})
			return err
		}
		refused(t, "unanswered", send(call))
		assert.NoError(t, send(call, output))
	})
}
