package kubeletplugin

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"
	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	resourceclient "k8s.io/client-go/kubernetes/typed/resource/v1"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"

	"github.com/draforge/draforge/drivers/devicestatus"
)

// driver is the kubelet plugin of one DRA driver name on this node.
type driver struct {
	name    string
	node    string
	cdiDir  string
	inv     *inventory
	claims  resourceclient.ResourceV1Interface
	log     zerolog.Logger
	health  time.Duration // how often health is re-sent while nothing changes
	now     func() time.Time
	mu      sync.Mutex // the helper serializes gRPC calls; this also covers idle()
	cp      *checkpoint
	metrics *Metrics
}

var _ kubeletplugin.DRAPlugin = (*driver)(nil)

// PrepareResourceClaims prepares each claim on its own: one claim's failure does not fail the
// others, and the kubelet retries only the failed ones.
func (d *driver) PrepareResourceClaims(ctx context.Context, claims []*resourcev1.ResourceClaim) (map[types.UID]kubeletplugin.PrepareResult, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make(map[types.UID]kubeletplugin.PrepareResult, len(claims))
	defer func() { d.metrics.setPrepared(d.name, len(d.cp.Claims)) }()
	for _, c := range claims {
		devs, err := d.prepare(ctx, c)
		d.metrics.observe(d.name, "prepare", err)
		if err != nil {
			d.log.Warn().Err(err).Str("claim", c.Namespace+"/"+c.Name).Msg("prepare failed")
			out[c.UID] = kubeletplugin.PrepareResult{Err: err}
			continue
		}
		d.log.Info().Str("claim", c.Namespace+"/"+c.Name).Int("devices", len(devs)).Msg("prepared")
		out[c.UID] = kubeletplugin.PrepareResult{Devices: devs}
	}
	return out, nil
}

func (d *driver) prepare(ctx context.Context, claim *resourcev1.ResourceClaim) ([]kubeletplugin.Device, error) {
	pc, ok := d.cp.Claims[claim.UID]
	if !ok {
		var err error
		if pc, err = d.plan(claim); err != nil {
			return nil, err
		}
		// CDI spec before the checkpoint: a crash in between leaves a spec the next prepare
		// rewrites, never a checkpoint entry without its spec.
		if err := writeCDISpec(d.cdiDir, d.name, claim.UID, d.spec(claim.UID, pc)); err != nil {
			return nil, err
		}
		d.cp.Claims[claim.UID] = pc
		if err := d.cp.save(); err != nil {
			delete(d.cp.Claims, claim.UID)
			return nil, fmt.Errorf("checkpoint: %w", err)
		}
	} else if !cdiSpecExists(d.cdiDir, d.name, claim.UID) {
		// Prepared before (a repeated call, maybe by an earlier process): the same answer, and
		// the spec restored should someone have removed it (an existing spec is left as it
		// was written, even if a device has disappeared since).
		if err := writeCDISpec(d.cdiDir, d.name, claim.UID, d.spec(claim.UID, pc)); err != nil {
			return nil, err
		}
	}
	if err := d.writeStatus(ctx, claim, pc); err != nil {
		return nil, err
	}
	devs := make([]kubeletplugin.Device, 0, len(pc.Devices))
	for _, pd := range pc.Devices {
		devs = append(devs, kubeletplugin.Device{Requests: []string{pd.Request}, PoolName: pd.Pool, DeviceName: pd.Device,
			CDIDeviceIDs: []string{pd.CDIDeviceID}, ShareID: pd.ShareID})
	}
	return devs, nil
}

// plan checks the claim's devices of this driver against the node's inventory and the other
// prepared claims: every device must exist on this node now, and a device is prepared for at
// most one claim without admin access (claims with admin access, or with share IDs of a device
// that allows multiple allocations, may share it), the last line of defence the DRAPlugin
// contract asks for.
func (d *driver) plan(claim *resourcev1.ResourceClaim) (*preparedClaim, error) {
	if claim.Status.Allocation == nil {
		return nil, fmt.Errorf("ResourceClaim %s/%s is not allocated", claim.Namespace, claim.Name)
	}
	snap, _ := d.inv.current()
	have := snap[d.name]
	pc := &preparedClaim{Namespace: claim.Namespace, Name: claim.Name}
	for _, r := range claim.Status.Allocation.Devices.Results {
		if r.Driver != d.name {
			continue
		}
		dev, ok := have[key(r.Pool, r.Device)]
		if !ok {
			return nil, fmt.Errorf("device %s of pool %s (driver %s) is not on node %s: removed from its SimulatedDevicePool, or the pool no longer targets the node",
				r.Device, r.Pool, d.name, d.node)
		}
		admin := r.AdminAccess != nil && *r.AdminAccess
		if !admin && r.ShareID == nil {
			if other := d.usedBy(r.Pool, r.Device, claim.UID); other != "" {
				return nil, fmt.Errorf("device %s of pool %s is already prepared for ResourceClaim %s without admin access", r.Device, r.Pool, other)
			}
		}
		pc.Devices = append(pc.Devices, preparedDevice{Request: r.Request, Pool: r.Pool, Device: r.Device, AdminAccess: admin,
			ShareID: r.ShareID, CDIDeviceID: cdiDeviceID(d.name, cdiDeviceName(claim.UID, len(pc.Devices), r.Device)), NoStatus: !dev.ReportsStatus})
	}
	return pc, nil
}

// usedBy names another prepared claim holding the device exclusively, or "".
func (d *driver) usedBy(pool, dev string, self types.UID) string {
	uids := make([]string, 0, len(d.cp.Claims))
	for uid := range d.cp.Claims {
		uids = append(uids, string(uid))
	}
	sort.Strings(uids)
	for _, uid := range uids {
		if types.UID(uid) == self {
			continue
		}
		pc := d.cp.Claims[types.UID(uid)]
		for _, pd := range pc.Devices {
			if pd.Pool == pool && pd.Device == dev && !pd.AdminAccess && pd.ShareID == nil {
				return pc.Namespace + "/" + pc.Name
			}
		}
	}
	return ""
}

// spec is the claim's CDI spec: per device environment variables like dra-example-driver's
// mock GPUs (GPU_DEVICE_<i>), with the DRAFORGE_ prefix, plus claim-wide variables in the
// spec's own containerEdits (applied whenever any of its devices is injected).
func (d *driver) spec(uid types.UID, pc *preparedClaim) *cdiSpec {
	snap, _ := d.inv.current()
	s := &cdiSpec{Version: cdiVersion, Kind: cdiKind(d.name), ContainerEdits: &cdiContainerEdits{Env: []string{
		"DRAFORGE_NODE_NAME=" + d.node,
		"DRAFORGE_DRIVER=" + d.name,
		"DRAFORGE_CLAIM=" + pc.Namespace + "/" + pc.Name,
		"DRAFORGE_CLAIM_UID=" + string(uid),
		fmt.Sprintf("DRAFORGE_DEVICE_COUNT=%d", len(pc.Devices)),
	}}}
	for i, pd := range pc.Devices {
		p := fmt.Sprintf("DRAFORGE_DEVICE_%d", i)
		env := []string{p + "=" + pd.Device, p + "_POOL=" + pd.Pool, p + "_REQUEST=" + pd.Request}
		// What the inventory knows now; a device removed since the prepare keeps its basic
		// variables (a repeated prepare rewrites a spec that someone deleted).
		if dev := snap[d.name][key(pd.Pool, pd.Device)]; dev != nil {
			env = append(env, p+"_TYPE="+dev.Type)
			if dev.Index >= 0 {
				env = append(env, fmt.Sprintf("%s_INDEX=%d", p, dev.Index))
			}
			for _, a := range []struct{ attr, env string }{{"uuid", "UUID"}, {"productName", "PRODUCT_NAME"},
				{"resource.kubernetes.io/pciBusID", "PCI_BUS_ID"}} {
				if v := attribute(dev.Attributes, a.attr); v != nil && v.StringValue != nil {
					env = append(env, p+"_"+a.env+"="+*v.StringValue)
				}
			}
			if n := dev.Network; n != nil {
				env = append(env, p+"_INTERFACE="+n.InterfaceName, p+"_IP="+strings.Join(n.IPs, ","), p+"_MAC="+n.HardwareAddress)
			}
		}
		if pd.AdminAccess {
			env = append(env, p+"_ADMIN_ACCESS=true")
		}
		s.Devices = append(s.Devices, cdiDevice{Name: strings.TrimPrefix(pd.CDIDeviceID, cdiKind(d.name)+"="), ContainerEdits: cdiContainerEdits{Env: env}})
	}
	return s
}

// writeStatus publishes the claim's status.devices for this driver, the entries of the devices
// whose pool reports device status (none: no write). Errors that a retry cannot fix (the claim
// is gone or replaced, the write is forbidden or invalid) are logged and do not fail the
// prepare: the status is information, the pod must still start. Others fail it, so the kubelet
// retries (the repeated prepare is answered from the checkpoint).
func (d *driver) writeStatus(ctx context.Context, claim *resourcev1.ResourceClaim, pc *preparedClaim) error {
	snap, _ := d.inv.current()
	reports := func(pool, dev string) bool {
		return slices.ContainsFunc(pc.Devices, func(pd preparedDevice) bool { return pd.Pool == pool && pd.Device == dev && !pd.NoStatus })
	}
	network := func(pool, dev string) *resourcev1.NetworkDeviceData {
		if x := snap[d.name][key(pool, dev)]; x != nil {
			return x.Network
		}
		return nil
	}
	entries := devicestatus.Entries(claim, d.name, reports, network, metav1.NewTime(d.now().Truncate(time.Second)))
	err := devicestatus.Apply(ctx, d.claims, claim, d.name, entries)
	if err == nil || !retryable(err) {
		if err != nil {
			d.log.Warn().Err(err).Str("claim", claim.Namespace+"/"+claim.Name).Msg("status.devices not written")
		}
		return nil
	}
	return err
}

func retryable(err error) bool {
	return !(apierrors.IsNotFound(err) || apierrors.IsConflict(err) || apierrors.IsForbidden(err) ||
		apierrors.IsInvalid(err) || apierrors.IsBadRequest(err) || apierrors.IsGone(err))
}

// UnprepareResourceClaims undoes prepares from the checkpoint alone (the claims may be deleted).
// A claim this driver never prepared is a success, as the contract requires.
func (d *driver) UnprepareResourceClaims(ctx context.Context, claims []kubeletplugin.NamespacedObject) (map[types.UID]error, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make(map[types.UID]error, len(claims))
	defer func() { d.metrics.setPrepared(d.name, len(d.cp.Claims)) }()
	for _, c := range claims {
		out[c.UID] = d.unprepare(ctx, c)
		d.metrics.observe(d.name, "unprepare", out[c.UID])
		if out[c.UID] == nil {
			d.log.Info().Str("claim", c.Namespace+"/"+c.Name).Msg("unprepared")
		}
	}
	return out, nil
}

func (d *driver) unprepare(ctx context.Context, c kubeletplugin.NamespacedObject) error {
	pc, ok := d.cp.Claims[c.UID]
	if !ok {
		return removeCDISpec(d.cdiDir, d.name, c.UID)
	}
	// Only a claim whose status.devices got entries of ours has any to clear.
	if pc.reportsStatus() {
		if err := devicestatus.ApplyByName(ctx, d.claims, c.Namespace, c.Name, c.UID, d.name, nil); err != nil && retryable(err) {
			return err
		}
	}
	if err := removeCDISpec(d.cdiDir, d.name, c.UID); err != nil {
		return err
	}
	delete(d.cp.Claims, c.UID)
	return d.cp.save()
}

// HandleError is called for background errors of the helper's gRPC servers; they are logged.
// The helper publishes no ResourceSlices here (the controller does), so none is fatal.
func (d *driver) HandleError(_ context.Context, err error, msg string) {
	d.log.Error().Err(err).Msg(msg)
}

// WatchHealthStatus reports every device of this driver on the node: Unhealthy while its pool
// has an "unhealthy" fault for it, Healthy otherwise. A report goes out at once, on every
// inventory change and every d.health (well inside the kubelet's 30s staleness window).
func (d *driver) WatchHealthStatus(ctx context.Context, reports chan<- kubeletplugin.DeviceHealthReport) error {
	for {
		snap, changed := d.inv.current()
		r := healthReport(snap[d.name], d.now())
		select {
		case <-ctx.Done():
			return nil
		case reports <- r:
		}
		select {
		case <-ctx.Done():
			return nil
		case <-changed:
		case <-time.After(d.health):
		}
	}
}

func healthReport(devs map[string]*device, now time.Time) kubeletplugin.DeviceHealthReport {
	keys := make([]string, 0, len(devs))
	for k := range devs {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	r := kubeletplugin.DeviceHealthReport{Devices: []kubeletplugin.DeviceHealth{}}
	for _, k := range keys {
		dev := devs[k]
		h := kubeletplugin.DeviceHealth{PoolName: dev.Pool, DeviceName: dev.Name, Health: kubeletplugin.HealthStatusHealthy, LastUpdated: now}
		if dev.Unhealthy {
			h.Health, h.Message = kubeletplugin.HealthStatusUnhealthy, "unhealthy fault in SimulatedDevicePool "+dev.SDP
		}
		r.Devices = append(r.Devices, h)
	}
	return r
}
