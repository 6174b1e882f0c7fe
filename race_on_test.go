//go:build race

package sessionstore

// raceOn says the tests run with the race detector, which slows
// CPU-bound model checks several times: they keep their small sizes.
const raceOn = true
