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

// A Store with Options.Keys creates encrypted sessions: their records
// are stored sealed, and read back only through a Store with the key.
func ExampleOptions_keys() {
	dir, err := os.MkdirTemp("", "sessionstore-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	keys, err := sessionstore.NewLocalKeys("local:1", map[string][]byte{"local:1": bytes.Repeat([]byte{7}, 32)})
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	s, err := sessionstore.Open(dir, &sessionstore.Options{Keys: keys})
	if err != nil {
		log.Fatal(err)
	}
	m, err := s.Create(ctx, sessionstore.Meta{Name: "private"})
	if err != nil {
		log.Fatal(err)
	}
	if _, err := s.Append(ctx, m.ID, sessionstore.UserText("the password is hunter2")); err != nil {
		log.Fatal(err)
	}
	evs, err := s.Load(ctx, m.ID)
	if err != nil {
		log.Fatal(err)
	}
	msg, err := evs[0].Message()
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(m.Encrypted, msg.Content)
	if err := s.Close(); err != nil {
		log.Fatal(err)
	}

	// Without the key: a *KeyError, never the sealed bytes.
	plain, err := sessionstore.Open(dir, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer plain.Close()
	_, err = plain.Load(ctx, m.ID)
	var ke *sessionstore.KeyError
	fmt.Println(errors.As(err, &ke), errors.Is(err, sessionstore.ErrKeyUnavailable))
	// Output:
	// true the password is hunter2
	// true true
}

// A data key believed leaked: Reencrypt seals the session's records again
// under a new one and drops the old one from the session's key record.
func ExampleStore_Reencrypt() {
	dir, err := os.MkdirTemp("", "sessionstore-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	keys, err := sessionstore.NewLocalKeys("local:1", map[string][]byte{"local:1": bytes.Repeat([]byte{7}, 32)})
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	s, err := sessionstore.Open(dir, &sessionstore.Options{Keys: keys})
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()
	m, err := s.Create(ctx, sessionstore.Meta{Name: "private"})
	if err != nil {
		log.Fatal(err)
	}
	if _, err := s.Append(ctx, m.ID, sessionstore.UserText("the password is hunter2")); err != nil {
		log.Fatal(err)
	}
	if err := s.Reencrypt(ctx, m.ID); err != nil {
		log.Fatal(err)
	}
	evs, err := s.Load(ctx, m.ID)
	if err != nil {
		log.Fatal(err)
	}
	msg, err := evs[0].Message()
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(msg.Content)
	// Output:
	// the password is hunter2
}
