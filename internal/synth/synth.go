// Package synth generates the synthetic payloads that the package's
// benchmarks and the bench module share, so both measure the same bytes.
package synth

import (
	"math/rand/v2"
	"strconv"
	"strings"
)

// ToolOutput returns n bytes of log-like text (words of test and compiler
// output and numbers) that vary with seed, so that payloads made from
// different seeds neither deduplicate nor compress to nothing.
func ToolOutput(seed uint64, n int) string {
	rng := rand.New(rand.NewPCG(seed, 7))
	words := []string{"ok", "FAIL", "PASS", "--- RUN", "TestStore", "main.go:", "error:", "warning:", "0.01s", "ctx", "panic:", "goroutine", "github.com/x/y", "\n"}
	var b strings.Builder
	b.Grow(n + 32)
	for b.Len() < n {
		b.WriteString(words[rng.IntN(len(words))])
		b.WriteByte(' ')
		b.WriteString(strconv.FormatUint(rng.Uint64()%100000, 10))
		b.WriteByte(' ')
	}
	return b.String()[:n]
}
