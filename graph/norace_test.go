//go:build !race

package graph

// raceEnabled is set under the race detector (see race_test.go).
const raceEnabled = false
