//go:build race

package kernels

// elemRace is set under the race detector, whose sync.Pool drops items at
// random on purpose, so the allocation tests of pooled kernels skip.
const elemRace = true
