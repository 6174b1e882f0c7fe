package openaiadapter_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/param"
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

// The Responses server refuses a turn of its reasoning model without the
// reasoning item its call followed, or with one the API could not pair or
// read, as the API does; it takes the turn with its reasoning, in the
// forms the adapter sends.
func TestFakeResponsesRefusesWithoutReasoning(t *testing.T) {
	srv := httptest.NewServer(fakeResponses())
	defer srv.Close()
	client := openai.NewClient(option.WithBaseURL(srv.URL), option.WithAPIKey("test"), option.WithMaxRetries(0))
	user := responses.ResponseInputItemUnionParam{OfMessage: &responses.EasyInputMessageParam{Role: responses.EasyInputMessageRoleUser,
		Content: responses.EasyInputMessageContentUnionParam{OfString: openai.String("q")}}}
	reasoning := func(raw string) responses.ResponseInputItemUnionParam {
		r := param.Override[responses.ResponseReasoningItemParam](json.RawMessage(raw))
		return responses.ResponseInputItemUnionParam{OfReasoning: &r}
	}
	call := func(id string) responses.ResponseInputItemUnionParam {
		fc := &responses.ResponseFunctionToolCallParam{CallID: "call_1", Name: "read_file", Arguments: "{}"}
		if id != "" {
			fc.ID = openai.String(id)
		}
		return responses.ResponseInputItemUnionParam{OfFunctionCall: fc}
	}
	output := responses.ResponseInputItemUnionParam{OfFunctionCallOutput: &responses.ResponseInputItemFunctionCallOutputParam{
		CallID: openai.String("call_1"), Output: responses.ResponseInputItemFunctionCallOutputOutputUnionParam{OfString: openai.String("x")}}}
	send := func(store bool, items ...responses.ResponseInputItemUnionParam) error {
		_, err := client.Responses.New(context.Background(), responses.ResponseNewParams{Model: "gpt-test", Store: openai.Bool(store),
			Input: responses.ResponseNewParamsInputUnion{OfInputItemList: items}})
		return err
	}
	withID := `{"type":"reasoning","id":"rs_1","summary":[],"encrypted_content":"enc-1"}`
	for name, err := range map[string]error{
		"the call without its reasoning":           send(false, user, call(""), output),
		"the call's item id without its reasoning": send(false, user, call("fc_1"), output),
		"reasoning by id, the call without id":     send(false, user, reasoning(withID), call(""), output),
		"forged encrypted content":                 send(false, user, reasoning(`{"type":"reasoning","summary":[],"encrypted_content":"forged"}`), call(""), output),
		"stateless without encrypted content":      send(false, user, reasoning(`{"type":"reasoning","id":"rs_1","summary":[]}`), call("fc_1"), output),
		"the reasoning after the call":             send(false, user, call(""), reasoning(`{"type":"reasoning","summary":[],"encrypted_content":"enc-1"}`), output),
	} {
		var apiErr *openai.Error
		require.True(t, errors.As(err, &apiErr), "%s: %v", name, err)
		assert.Equal(t, http.StatusBadRequest, apiErr.StatusCode, name)
	}
	assert.NoError(t, send(false, user, reasoning(withID), call("fc_1"), output), "as the API gave them")
	assert.NoError(t, send(false, user, reasoning(`{"type":"reasoning","summary":[],"encrypted_content":"enc-1"}`), call(""), output), "stateless, no ids")
	assert.NoError(t, send(true, user, reasoning(`{"type":"reasoning","id":"rs_1","summary":[]}`), call("fc_1"), output), "stored, by id")
}
