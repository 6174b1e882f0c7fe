package web_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"

	"github.com/sessionstore/sessionstore"
	"github.com/sessionstore/sessionstore/cmd/web"
)

// ExampleNew serves the web view of a root through a read-only Store,
// which reads beside a writer in another process.
func ExampleNew() {
	root, _ := os.MkdirTemp("", "web-example")
	defer os.RemoveAll(root)
	ctx := context.Background()
	w, _ := sessionstore.Open(root, nil)
	m, _ := w.Create(ctx, sessionstore.Meta{Name: "example"})
	w.Append(ctx, m.ID, sessionstore.UserText("Hello"))
	defer w.Close()

	ro, err := sessionstore.Open(root, &sessionstore.Options{ReadOnly: true})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer ro.Close()
	srv := httptest.NewServer(web.New(ro, web.Options{}))
	defer srv.Close()

	resp, err := http.Get(srv.URL + "/api/sessions")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	fmt.Println(resp.StatusCode, strings.Contains(string(body), `"name":"example","working_dir":"","model":""`), strings.Contains(string(body), `"events":1`))
	// Output: 200 true true
}

// ExampleSummary sums up a custom record, as the view shows it: a line an
// importer kept as it found it.
func ExampleSummary() {
	rec := json.RawMessage(`{"parentUuid":"b3af772f-56ab-4b26-b550-7ad62735d794","isSidechain":false,"type":"system","subtype":"informational","content":"PostToolUse hook completed"}`)
	fmt.Println(web.Summary(rec))
	// Output: system · informational · content: PostToolUse hook completed · +2 more fields
}
