//go:build race

package graph

// raceEnabled is set under the race detector, whose sync.Pool drops items
// at random on purpose, so the allocation test skips.
const raceEnabled = true
