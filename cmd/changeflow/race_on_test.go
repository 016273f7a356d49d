//go:build race

package main

// raceEnabled: the test binary runs under the race detector, which slows
// the in-process side of a measurement (TestStatusReadLoad's bare server).
const raceEnabled = true
