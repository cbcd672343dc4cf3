// Command pause is the sandbox ("pause") image of the test cluster's pods: it holds the pod's namespaces
// and waits for a signal. The test node has no registry to pull the usual pause image from, so it builds
// this one with k8s/image and imports it.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	// As the pod's first process it would reap orphans; pods here share no process namespace, so it has none.
	c := make(chan os.Signal, 1)
	signal.Notify(c, syscall.SIGINT, syscall.SIGTERM)
	<-c
}
