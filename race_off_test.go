//go:build !race

package sessionstore

// raceOn says the tests run with the race detector (race_on_test.go).
const raceOn = false
