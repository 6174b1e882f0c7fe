package web_test

import (
	"context"
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
