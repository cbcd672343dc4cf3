//go:build kube

package cluster

import (
	"errors"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ssegate/ssegate/pkg/kafkatest"
)

// TestChartSlowStartOnNode: a gateway pod whose topic does not exist yet is alive and unready, and is never
// restarted for it. Its startup probe asks /healthz, so the container counts as started at once while
// /readyz says the topic is missing; once the topic is created the pod turns ready, still without a
// restart. Before, the startup probe asked /readyz with a fixed budget of 300 s: the container never counted
// as started while it waited (so this test fails within its first minute), and was restarted after 300 s.
func TestChartSlowStartOnNode(t *testing.T) {
	c := newCluster(t)
	needEnv(t, "SSEGATE_KUBE_NODE", "`make e2e-k8s`")
	tag := needEnv(t, "SSEGATE_IMAGE_TAG", "`make e2e-k8s`")
	brokers := kafkatest.Brokers(t)
	topic := kafkatest.TopicName(t) // created only once the pod runs
	ns := c.namespace(t, "slow-start")
	cfg := c.helm(t, ns)
	vals := slowStartValues(brokers, topic, tag)
	if _, err := install(t, cfg, ns, nodeRelease, vals, 0); err != nil { // no wait: the pod is to stay unready
		t.Fatalf("helm install: %v", err)
	}
	t.Cleanup(func() { c.uninstall(t, cfg, ns) })
	sts, err := c.clients.AppsV1().StatefulSets(ns).Get(t.Context(), nodeRelease+"-ssegate-gateway", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if sp := sts.Spec.Template.Spec.Containers[0].StartupProbe; sp == nil || sp.HTTPGet == nil || sp.HTTPGet.Path != "/healthz" {
		t.Fatalf("stored startup probe %+v, want /healthz", sp)
	}

	pod := nodeRelease + "-ssegate-gateway-0"
	state := func() (*corev1.ContainerStatus, error) {
		p, err := c.clients.CoreV1().Pods(ns).Get(t.Context(), pod, metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		if p.Status.Phase != corev1.PodRunning || len(p.Status.ContainerStatuses) == 0 {
			return nil, fmt.Errorf("pod %s is %s", pod, p.Status.Phase)
		}
		cs := &p.Status.ContainerStatuses[0]
		if cs.RestartCount > 0 {
			t.Fatalf("the gateway was restarted while it waited for its topic: %+v", cs.LastTerminationState)
		}
		return cs, nil
	}
	t0 := time.Now()
	checkFor(t, time.Minute, 200*time.Millisecond, func() error {
		cs, err := state()
		switch {
		case err != nil:
			return err
		case cs.Started == nil || !*cs.Started:
			return errors.New("the container has not passed its startup probe")
		case cs.Ready:
			return errors.New("the gateway is ready without its topic")
		}
		return nil
	})
	t.Logf("pod %s started, unready, waiting for its topic, %v after the install", pod, time.Since(t0).Round(time.Millisecond))
	// Several readiness periods, and liveness probes meanwhile: alive and unready it stays.
	for end := time.Now().Add(5 * time.Second); time.Now().Before(end); time.Sleep(500 * time.Millisecond) {
		if cs, err := state(); err != nil || cs.Ready {
			t.Fatalf("waiting for its topic: %v, ready %v", err, cs != nil && cs.Ready)
		}
	}

	kafkatest.CreateTopic(t, topic, 2, nil)
	t0 = time.Now()
	checkFor(t, time.Minute, 200*time.Millisecond, func() error {
		cs, err := state()
		if err == nil && !cs.Ready {
			err = errors.New("the gateway is not ready since its topic was created")
		}
		return err
	})
	t.Logf("pod %s ready %v after its topic was created, never restarted", pod, time.Since(t0).Round(time.Millisecond))
}

// slowStartValues are the values of TestChartSlowStartOnNode: one gateway pod on topic, readiness probed every
// second so that the test sees it turn ready at once.
func slowStartValues(brokers []string, topic, tag string) map[string]any {
	bs := make([]any, 0, len(brokers))
	for _, b := range brokers {
		bs = append(bs, b)
	}
	return map[string]any{
		"kafka": map[string]any{"brokers": bs},
		"image": map[string]any{"gateway": map[string]any{"tag": tag}, "pullPolicy": "Never"},
		"gateway": map[string]any{
			"topics": []any{topic}, "replicas": 1, "ringBytes": "8MiB",
			"drainSeconds": 2, "endpointPropagationSeconds": 1, "writeTimeoutSeconds": 2, "minReadySeconds": nodeMinReady,
			"probes": map[string]any{"readinessPeriodSeconds": 1},
			"resources": map[string]any{
				"requests": map[string]any{"cpu": "10m", "memory": "32Mi"},
				"limits":   map[string]any{"memory": "256Mi"},
			},
		},
		"test": map[string]any{"enabled": false},
	}
}
