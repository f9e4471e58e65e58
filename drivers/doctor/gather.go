package doctor

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"

	"github.com/draforge/draforge/drivers/gvr"
)

// GatherOptions say where Gather looks.
type GatherOptions struct {
	Discovery discovery.DiscoveryInterface
	Dynamic   dynamic.Interface
	// ControllerURL, when set, is probed at /readyz with HTTP (nil: http.DefaultClient).
	ControllerURL string
	HTTP          *http.Client
}

// Gather collects Facts from a live cluster. It does not fail: every problem is recorded in
// the facts, for the checks to report. ctx bounds the controller probe and the CRD read;
// discovery calls are bounded by the rest.Config timeout of the discovery client.
func Gather(ctx context.Context, o GatherOptions) Facts {
	var f Facts
	api := &APIFacts{}
	var draAPIs []string
	groups, err := o.Discovery.ServerGroups()
	if err != nil {
		api.Error = err.Error()
	} else {
		for _, g := range groups.Groups {
			if g.Name != "resource.k8s.io" && g.Name != "scheduling.k8s.io" {
				continue
			}
			for _, v := range g.Versions {
				draAPIs = append(draAPIs, v.GroupVersion)
				if g.Name == "resource.k8s.io" {
					api.Versions = append(api.Versions, v.Version)
				}
			}
		}
	}
	for _, v := range api.Versions {
		if v != "v1" {
			continue
		}
		rl, err := o.Discovery.ServerResourcesForGroupVersion("resource.k8s.io/v1")
		if err != nil {
			api.Error = err.Error()
			break
		}
		for _, r := range rl.APIResources {
			api.V1Resources = append(api.V1Resources, r.Name)
		}
	}
	f.ResourceAPI = api

	if v, err := o.Discovery.ServerVersion(); err != nil {
		f.VersionError = err.Error()
	} else {
		f.ServerVersion = v.GitVersion
	}

	if err == nil {
		f.Features = gatherFeatures(ctx, o.Discovery, draAPIs)
	}
	f.CRD = gatherCRD(ctx, o.Dynamic)
	if o.ControllerURL != "" {
		f.Controller = probe(ctx, o.HTTP, o.ControllerURL)
	}
	return f
}

func gatherCRD(ctx context.Context, dyn dynamic.Interface) *CRDFacts {
	c := &CRDFacts{Name: gvr.SimulatedDevicePoolCRD}
	u, err := dyn.Resource(gvr.CustomResourceDefinitions).Get(ctx, gvr.SimulatedDevicePoolCRD, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return c
	case err != nil:
		c.Error = err.Error()
		return c
	}
	c.Found = true
	versions, _, _ := unstructured.NestedSlice(u.Object, "spec", "versions")
	for _, v := range versions {
		m, _ := v.(map[string]any)
		if served, _ := m["served"].(bool); served {
			name, _ := m["name"].(string)
			c.ServedVersions = append(c.ServedVersions, name)
		}
	}
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	c.EstablishedMessage = "no Established condition yet"
	for _, cond := range conds {
		m, _ := cond.(map[string]any)
		if m["type"] != "Established" {
			continue
		}
		c.Established = m["status"] == "True"
		c.EstablishedMessage = fmt.Sprintf("Established=%v reason=%v: %v", m["status"], m["reason"], m["message"])
	}
	return c
}

func probe(ctx context.Context, client *http.Client, url string) *ControllerFacts {
	if client == nil {
		client = http.DefaultClient
	}
	c := &ControllerFacts{URL: url}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(url, "/")+"/readyz", nil)
	if err != nil {
		c.Error = err.Error()
		return c
	}
	resp, err := client.Do(req)
	if err != nil {
		c.Error = err.Error()
		return c
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	c.StatusCode, c.Body = resp.StatusCode, string(body)
	return c
}
