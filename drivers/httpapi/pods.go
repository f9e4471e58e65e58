package httpapi

import (
	"net/http"
	"strings"

	"github.com/draforge/draforge/drivers/explain"
	"github.com/draforge/draforge/drivers/inventory"
)

// OccupancyPage is /api/occupancy: node rows matching the filter, one page of them, and the
// totals over every matching row (so a client at 1,000 nodes never loads every device).
type OccupancyPage struct {
	Total     int                       `json:"total"` // matching rows
	Nodes     int                       `json:"nodes"` // all rows
	Offset    int                       `json:"offset"`
	Limit     int                       `json:"limit"`
	Devices   int                       `json:"devices"`
	Allocated int                       `json:"allocated"`
	Tainted   int                       `json:"tainted"`
	Free      int                       `json:"free"`
	Rows      []inventory.NodeOccupancy `json:"rows"`
	// TopologyKeys are the topology label keys the cluster's nodes carry (inventory.TopologyKeys),
	// what groupBy can name.
	TopologyKeys []string `json:"topologyKeys"`
	// GroupBy, when the request named a label key, orders the matching rows by its value
	// before paging; Groups sums each domain over every matching row.
	GroupBy string                     `json:"groupBy,omitempty"`
	Groups  []inventory.OccupancyGroup `json:"groups,omitempty"`
}

// NodeDevices is /api/occupancy/{node}: one node's row and its devices.
type NodeDevices struct {
	inventory.NodeOccupancy
	DeviceList []inventory.DeviceView `json:"deviceList"`
	Pods       []inventory.PodView    `json:"pods"`
}

const (
	codeBadRequest        = "bad_request"
	defaultOccupancyLimit = 100
	maxOccupancyLimit     = 1000
)

func (s *Server) podRoutes(mux *http.ServeMux, snap func(func(http.ResponseWriter, *http.Request, *view)) http.HandlerFunc) {
	mux.HandleFunc("GET /api/pods", snap(func(w http.ResponseWriter, r *http.Request, v *view) {
		if !etag(w, r, v.version) {
			writeJSON(w, http.StatusOK, v.pods)
		}
	}))
	mux.HandleFunc("GET /api/pods/{namespace}/{name}", snap(func(w http.ResponseWriter, r *http.Request, v *view) {
		writeNamed(w, r, v, v.pods, func(p inventory.PodView) (string, string) { return p.Namespace, p.Name }, "no such Pod with ResourceClaims")
	}))
	mux.HandleFunc("GET /api/explain/pod/{namespace}/{name}", snap(func(w http.ResponseWriter, r *http.Request, v *view) {
		res, err := explain.ExplainPod(r.Context(), v.snap, r.PathValue("namespace"), r.PathValue("name"))
		switch {
		case explain.IsPodNotFound(err):
			writeError(w, http.StatusNotFound, codeNotFound, "no such Pod")
		case err != nil:
			s.o.Log.Error().Err(err).Str("route", "explain pod").Msg("explain failed")
			writeError(w, http.StatusInternalServerError, codeInternal, "the pod could not be explained")
		default:
			if !etag(w, r, v.version) {
				writeJSON(w, http.StatusOK, res)
			}
		}
	}))
	mux.HandleFunc("GET /api/occupancy", snap(func(w http.ResponseWriter, r *http.Request, v *view) {
		o, err := parseOccupancyQuery(r.URL.RawQuery)
		if err != nil {
			writeError(w, http.StatusBadRequest, codeBadRequest, err.Error())
			return
		}
		if etag(w, r, v.version) {
			return
		}
		writeJSON(w, http.StatusOK, occupancyPage(v.occupancy, o))
	}))
	mux.HandleFunc("GET /api/occupancy/{node}", snap(func(w http.ResponseWriter, r *http.Request, v *view) {
		node := r.PathValue("node")
		if node == "-" { // devices bound to no single node
			node = ""
		}
		for _, row := range v.occupancy {
			if row.Node != node {
				continue
			}
			nd := NodeDevices{NodeOccupancy: row, DeviceList: []inventory.DeviceView{}, Pods: []inventory.PodView{}}
			for _, d := range v.devices {
				if d.Node == node {
					nd.DeviceList = append(nd.DeviceList, d)
				}
			}
			for _, p := range v.pods {
				if p.Node == node && node != "" {
					nd.Pods = append(nd.Pods, p)
				}
			}
			if !etag(w, r, v.version) {
				writeJSON(w, http.StatusOK, nd)
			}
			return
		}
		writeError(w, http.StatusNotFound, codeNotFound, "no such node")
	}))
}

// occupancyPage filters rows by q (a substring of the node name, a pool, or a label written
// key=value or key) and state ("allocated", "free", "tainted": rows with at least one such
// device), orders them by the domain of groupBy when set, then cuts one page.
func occupancyPage(rows []inventory.NodeOccupancy, o occupancyQuery) OccupancyPage {
	p := OccupancyPage{Nodes: len(rows), Offset: o.offset, Limit: o.limit, Rows: []inventory.NodeOccupancy{},
		TopologyKeys: inventory.TopologyKeys(rows), GroupBy: o.groupBy}
	q := strings.TrimSpace(o.filter)
	var matching []inventory.NodeOccupancy
	for _, r := range rows {
		if matchRow(r, q) && matchState(r, o.state) {
			matching = append(matching, r)
		}
	}
	if o.groupBy != "" {
		matching, p.Groups = inventory.GroupOccupancy(matching, o.groupBy)
	}
	for _, r := range matching {
		if p.Total >= o.offset && len(p.Rows) < o.limit {
			p.Rows = append(p.Rows, r)
		}
		p.Total++
		p.Devices += r.Devices
		p.Allocated += r.Allocated
		p.Tainted += r.Tainted
		p.Free += r.Free
	}
	return p
}

func matchRow(r inventory.NodeOccupancy, q string) bool {
	if q == "" || strings.Contains(r.Node, q) {
		return true
	}
	for _, pool := range r.Pools {
		if strings.Contains(pool, q) {
			return true
		}
	}
	k, val, hasVal := strings.Cut(q, "=")
	for lk, lv := range r.Labels {
		if lk == k && (!hasVal || lv == val) {
			return true
		}
	}
	return false
}

func matchState(r inventory.NodeOccupancy, state string) bool {
	switch state {
	case "allocated":
		return r.Allocated > 0
	case "free":
		return r.Free > 0
	case "tainted":
		return r.Tainted > 0
	}
	return true
}
