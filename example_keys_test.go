package sessionstore_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/sessionstore/sessionstore"
)

// A LocalKeys from a key file wraps a data key under the file's current
// key, bound to a context; it unwraps under no other context.
func ExampleLoadKeyFile() {
	dir, err := os.MkdirTemp("", "sessionstore-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	// A key file: "<id> <32 bytes, base64>" a line, the first current,
	// mode 0600.
	path := filepath.Join(dir, "keys")
	line := "local:2026-12 " + base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{7}, 32)) + "\n"
	if err := os.WriteFile(path, []byte(line), 0o600); err != nil {
		log.Fatal(err)
	}
	keys, err := sessionstore.LoadKeyFile(path)
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	id, wrapped, err := keys.Wrap(ctx, []byte("a session's data key"), []byte("session 1"))
	if err != nil {
		log.Fatal(err)
	}
	dataKey, err := keys.Unwrap(ctx, id, wrapped, []byte("session 1"))
	fmt.Println(id, string(dataKey), err)
	_, err = keys.Unwrap(ctx, id, wrapped, []byte("session 2"))
	fmt.Println(errors.Is(err, sessionstore.ErrWrongKey))
	// Output:
	// local:2026-12 a session's data key <nil>
	// true
}
