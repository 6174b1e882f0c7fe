package registry_test

import (
	"context"
	"fmt"

	"github.com/google/uuid"

	"github.com/sessionstore/sessionstore/internal/registry"
)

// A Table with room for one session: registering a second one closes the
// idle first, and what was kept for it comes back when it opens again.
func ExampleTable() {
	type session struct{ name string }
	names := map[uuid.UUID]string{}
	tab := registry.NewTable[*session, string](registry.Config[*session]{
		Max: 1,
		New: func(e *registry.Entry[*session]) *session { return &session{name: names[e.ID]} },
		CloseIdle: func(s *session) error {
			fmt.Println("close", s.name)
			return nil
		},
	})
	use := func(id uuid.UUID) {
		e, open, err := tab.Acquire(context.Background(), id)
		if err != nil {
			panic(err)
		}
		if open {
			if k, ok := tab.Take(id); ok {
				fmt.Println("open", e.Value.name, "with", k)
			} else {
				fmt.Println("open", e.Value.name)
			}
			e.Opened()
		}
		tab.Keep(id, func(k *string) { *k = "its selection" })
		tab.Release(e)
	}
	a, b := uuid.New(), uuid.New()
	names[a], names[b] = "a", "b"
	use(a)
	use(a)
	use(b)
	use(a)
	// Output:
	// open a
	// close a
	// open b
	// close b
	// open a with its selection
}
