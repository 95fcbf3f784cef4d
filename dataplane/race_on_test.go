//go:build race

package dataplane

// raceOn: the race detector slows the simulation several times over.
const raceOn = true
