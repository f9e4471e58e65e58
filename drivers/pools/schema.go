package pools

import (
	"context"
	"fmt"
	"strconv"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/cache"

	"github.com/draforge/draforge/drivers/gvr"
)

// Schema skew: the controller reads the installed SimulatedDevicePool CRD and compares its
// schema-version annotation with the version it was built for. A CRD that predates the
// controller (Helm never upgrades CRDs) shows on every pool as Degraded=True
// SchemaPredatesController while Ready stays as it is; a current (or newer, additive) CRD
// shows Degraded=False SchemaCurrent.
const (
	// SchemaAnnotation carries the CRD's schema version, a decimal integer. A CRD without it is
	// version 0.
	SchemaAnnotation = "draforge.oaslananka/schema-version"
	// SchemaVersion is the CRD schema version this controller expects (deploy/crds carries it).
	SchemaVersion = 1

	ConditionDegraded        = "Degraded"
	ReasonSchemaPredates     = "SchemaPredatesController"
	ReasonSchemaCurrent      = "SchemaCurrent"
	schemaConditionNowFormat = "2006-01-02T15:04:05Z"
)

// installedSchema returns the schema version of the installed CRD from the cache: 0 when the
// CRD or its annotation is missing or unreadable.
func installedSchema(crds cache.SharedIndexInformer) int {
	if crds == nil {
		return 0
	}
	o, ok, _ := crds.GetStore().GetByKey(gvr.SimulatedDevicePoolCRD)
	if !ok {
		return 0
	}
	u, ok := o.(*unstructured.Unstructured)
	if !ok {
		return 0
	}
	n, err := strconv.Atoi(u.GetAnnotations()[SchemaAnnotation])
	if err != nil || n < 0 {
		return 0
	}
	return n
}

// schemaCondition is the Degraded condition the pool should show (without timestamps).
func (d *Driver) schemaCondition(obj *unstructured.Unstructured) map[string]any {
	have := installedSchema(d.crds)
	c := map[string]any{"type": ConditionDegraded, "observedGeneration": obj.GetGeneration()}
	if have < SchemaVersion {
		c["status"], c["reason"] = string(metav1.ConditionTrue), ReasonSchemaPredates
		c["message"] = fmt.Sprintf("the installed CRD %s has schema version %d, this controller needs %d: apply the CRDs of this release (deploy/crds)", gvr.SimulatedDevicePoolCRD, have, SchemaVersion)
	} else {
		c["status"], c["reason"] = string(metav1.ConditionFalse), ReasonSchemaCurrent
		c["message"] = fmt.Sprintf("the installed CRD %s has schema version %d (this controller needs %d)", gvr.SimulatedDevicePoolCRD, have, SchemaVersion)
	}
	return c
}

// schemaStale is the poolSchemaConditionStale observation: the pool's Degraded condition does
// not say what the installed CRD says.
func (d *Driver) schemaStale(_ context.Context, obj *unstructured.Unstructured) (bool, error) {
	want := d.schemaCondition(obj)
	for _, c := range conditionsOf(obj) {
		if c["type"] != ConditionDegraded {
			continue
		}
		g, _, _ := unstructured.NestedInt64(c, "observedGeneration")
		return c["status"] != want["status"] || c["reason"] != want["reason"] || c["message"] != want["message"] ||
			g != obj.GetGeneration(), nil
	}
	return true, nil
}

// recordSchema is the recordSchemaCondition action; publish, recordPoolStatus and
// describeInvalidSpec also call it, so every transition leaves the condition current.
func (d *Driver) recordSchema(_ context.Context, obj *unstructured.Unstructured) error {
	d.setSchemaCondition(obj)
	return nil
}

func (d *Driver) setSchemaCondition(obj *unstructured.Unstructured) {
	want := d.schemaCondition(obj)
	now := d.now().UTC().Format(schemaConditionNowFormat)
	want["lastTransitionTime"] = now
	var out []any
	found := false
	for _, c := range conditionsOf(obj) {
		if c["type"] == ConditionDegraded {
			found = true
			if ltt, ok := c["lastTransitionTime"].(string); ok && c["status"] == want["status"] {
				want["lastTransitionTime"] = ltt
			}
			out = append(out, want)
			continue
		}
		out = append(out, c)
	}
	if !found {
		out = append(out, want)
	}
	_ = unstructured.SetNestedSlice(obj.Object, out, "status", "conditions")
}

func conditionsOf(obj *unstructured.Unstructured) []map[string]any {
	list, _, _ := unstructured.NestedSlice(obj.Object, "status", "conditions")
	var out []map[string]any
	for _, c := range list {
		if m, ok := c.(map[string]any); ok {
			out = append(out, m)
		}
	}
	return out
}
