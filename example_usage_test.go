package sessionstore_test

import (
	"context"
	"fmt"
	"log"
	"os"

	"github.com/sessionstore/sessionstore"
)

// Usage adds up the tokens messages report, per session, per branch and
// with a session's subagents, and prices them with Options.Prices.
func ExampleStore_Usage() {
	dir, err := os.MkdirTemp("", "sessionstore-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	ctx := context.Background()
	store, err := sessionstore.Open(dir, &sessionstore.Options{Prices: map[string]sessionstore.Price{
		"big-model": {Input: 3, Output: 15, CacheRead: 0.3, CacheWrite: 3.75}, // per million tokens
	}})
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()

	answer := func(session sessionstore.Meta, model string, in, out int64) sessionstore.Event {
		ev, err := store.Append(ctx, session.ID, sessionstore.NewEvent(sessionstore.KindMessage, sessionstore.RoleAssistant,
			sessionstore.Message{Content: "...", Model: model, Usage: &sessionstore.Usage{InputTokens: in, OutputTokens: out}}))
		if err != nil {
			log.Fatal(err)
		}
		return ev
	}
	main, err := store.Create(ctx, sessionstore.Meta{Name: "main", Model: "big-model"})
	if err != nil {
		log.Fatal(err)
	}
	first := answer(main, "", 1000, 100) // no model: the session's
	answer(main, "big-model", 2000, 200)
	if err := store.Branch(ctx, main.ID, first.ID); err != nil { // retry the second turn
		log.Fatal(err)
	}
	answer(main, "big-model", 1500, 50)
	sub, err := store.Create(ctx, sessionstore.Meta{Name: "helper", ParentSession: main.ID, SpawnedBy: first.ID})
	if err != nil {
		log.Fatal(err)
	}
	answer(sub, "small-model", 400, 40)

	for _, scope := range []struct {
		name string
		sessionstore.UsageScope
	}{
		{"session", sessionstore.UsageScope{Kind: sessionstore.UsageSession}},
		{"branch", sessionstore.UsageScope{Kind: sessionstore.UsageBranch}},
		{"tree", sessionstore.UsageScope{Kind: sessionstore.UsageTree}},
	} {
		u, err := store.Usage(ctx, main.ID, scope.UsageScope)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("%-7s in %5d out %3d messages %d cost %.4f unpriced %v\n", scope.name, u.InputTokens, u.OutputTokens, u.Messages, u.Cost, u.Unpriced)
	}
	// Output:
	// session in  4500 out 350 messages 3 cost 0.0187 unpriced []
	// branch  in  2500 out 150 messages 2 cost 0.0097 unpriced []
	// tree    in  4900 out 390 messages 4 cost 0.0187 unpriced [small-model]
}
