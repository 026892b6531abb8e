package main

import (
	"runtime"
	"runtime/debug"
	"testing"
)

func TestSetGOMAXPROCS(t *testing.T) {
	before := runtime.GOMAXPROCS(0)
	defer runtime.GOMAXPROCS(before)
	noEnv := func(string) string { return "" }

	if err := setGOMAXPROCS(0, noEnv); err != nil {
		t.Fatal(err)
	}
	if got := runtime.GOMAXPROCS(0); got != before+extraProcs {
		t.Fatalf("automatic: GOMAXPROCS %d, want %d", got, before+extraProcs)
	}
	runtime.GOMAXPROCS(before)
	if err := setGOMAXPROCS(0, func(k string) string { return map[string]string{"GOMAXPROCS": "3"}[k] }); err != nil {
		t.Fatal(err)
	}
	if got := runtime.GOMAXPROCS(0); got != before {
		t.Fatalf("with GOMAXPROCS in the environment: %d, want it left at %d", got, before)
	}
	if err := setGOMAXPROCS(7, noEnv); err != nil {
		t.Fatal(err)
	}
	if got := runtime.GOMAXPROCS(0); got != 7 {
		t.Fatalf("--gomaxprocs 7: GOMAXPROCS %d", got)
	}
	if err := setGOMAXPROCS(-1, noEnv); err == nil {
		t.Fatal("--gomaxprocs -1 accepted")
	}
}

func TestSetGCPercent(t *testing.T) {
	before := debug.SetGCPercent(100)
	defer debug.SetGCPercent(before)
	if err := setGCPercent(250); err != nil {
		t.Fatal(err)
	}
	if got := debug.SetGCPercent(100); got != 250 {
		t.Fatalf("--gc-percent 250: GC percent %d", got)
	}
	if err := setGCPercent(0); err != nil {
		t.Fatal(err)
	}
	if got := debug.SetGCPercent(100); got != 100 {
		t.Fatalf("--gc-percent 0 changed the GC percent to %d", got)
	}
	if err := setGCPercent(-5); err == nil {
		t.Fatal("--gc-percent -5 accepted")
	}
}
