// Package cluster tests the Helm chart (helm/ssegate) on a real Kubernetes that the project's scripts build and
// start (k8s/cluster): the Helm v4 SDK installs, upgrades, rolls back and uninstalls releases the way the
// helm command does.
//
// Its tests are behind the build tag kube and come in two tiers:
//
//   - the API server tier (TestChartOnAPIServer): etcd and kube-apiserver only, started by
//     `make test-k8s`. Objects are stored and validated with strict server-side field validation, but
//     nothing runs them, so the test asserts the objects, the revisions and their removal.
//   - the node tier (TestChartOnNode): a controller manager, a scheduler and a kubelet with containerd
//     and runc, started by `make e2e-k8s`, with the images of `make image` imported and a real Kafka the
//     pods reach on the node's bridge. Clients stream from the pods while pods are deleted and the release
//     is upgraded, and must end with exactly the topic's records.
//
// Without the cluster a test is skipped, except under CI=true, where it fails. The cluster is named by
// SSEGATE_KUBECONFIG, never by KUBECONFIG: a test must not install into whatever cluster a shell points at.
//
// Concurrency: each test works in namespaces of its own; the node tier runs alone on its node.
package cluster
