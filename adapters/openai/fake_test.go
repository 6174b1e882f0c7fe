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

// The examples' servers refuse a result without its call, so the
// examples' passing means the adapter paired them.
func TestFakeServersRefuse(t *testing.T) {
	chat := httptest.NewServer(fakeChat())
	defer chat.Close()
	client := openai.NewClient(option.WithBaseURL(chat.URL), option.WithAPIKey("test"), option.WithMaxRetries(0))
	_, err := client.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
		Model:    "gpt-test",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("q"), openai.ToolMessage("x", "call_9")},
	})
	var apiErr *openai.Error
	require.True(t, errors.As(err, &apiErr), "%v", err)
	assert.Equal(t, http.StatusBadRequest, apiErr.StatusCode)

	resp := httptest.NewServer(fakeResponses())
	defer resp.Close()
	client = openai.NewClient(option.WithBaseURL(resp.URL), option.WithAPIKey("test"), option.WithMaxRetries(0))
	_, err = client.Responses.New(context.Background(), responses.ResponseNewParams{
		Model: "gpt-test",
		Input: responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{
			{OfFunctionCallOutput: &responses.ResponseInputItemFunctionCallOutputParam{
				CallID: openai.String("call_9"),
				Output: responses.ResponseInputItemFunctionCallOutputOutputUnionParam{OfString: openai.String("x")},
			}},
		}},
	})
	require.True(t, errors.As(err, &apiErr), "%v", err)
	assert.Equal(t, http.StatusBadRequest, apiErr.StatusCode)
}
