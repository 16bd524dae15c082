//go:build !race

package kernels

// elemRace is set under the race detector (see elem_race_test.go).
const elemRace = false
