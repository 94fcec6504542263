//go:build chaos

package chaos

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/leaseapi/leaseapi/internal/pgcluster"
)

// The programs of the Patroni cluster, as Debian installs them (make
// chaos-failover runs scripts/ensure-packages.sh first).
const (
	python3Bin = "/usr/bin/python3"
	patroniBin = "/usr/bin/patroni"
	etcdBin    = "/usr/bin/etcd"
	haproxyBin = "/usr/sbin/haproxy"
	pg15Bin    = "/usr/lib/postgresql/15/bin"
)

// patroniTTL is the leader key's TTL: a dead leader is replaced within it
// (plus a loop). loop_wait + 2 × retry_timeout must not exceed it.
const (
	patroniTTL       = 10
	patroniLoopWait  = 2
	patroniRetryWait = 4
)

// patroniCluster is one etcd, three Patroni-managed Postgres 15 nodes and
// an HAProxy that follows the primary (Patroni's REST /primary check), all
// on loopback ports in one temporary directory.
type patroniCluster struct {
	t    *testing.T
	dir  string
	sync bool // synchronous_mode and synchronous_mode_strict

	etcdPort, etcdPeer int
	etcd               *proc
	nodes              []*patroniNode
	haproxyPort        int
	haproxy            *proc
	uid, gid           uint32
	httpc              *http.Client
}

type patroniNode struct {
	name         string
	dir, data    string
	port, rest   int
	config       string
	patroni      *proc
	patroniProcs []*proc
}

// patroniMember is one member of GET /cluster.
type patroniMember struct {
	Name     string `json:"name"`
	Role     string `json:"role"` // leader, sync_standby, replica
	State    string `json:"state"`
	Timeline int    `json:"timeline"`
	Port     int    `json:"port"`
}

// startPatroni starts etcd, the three nodes and HAProxy, and waits until
// the cluster has a leader and two streaming standbys.
func startPatroni(t *testing.T, sync bool) *patroniCluster {
	for _, b := range []string{python3Bin, patroniBin, etcdBin, haproxyBin} {
		if _, err := os.Stat(b); err != nil {
			t.Fatalf("the failover suite needs %s (make chaos-failover installs patroni, python3-etcd, etcd-server, haproxy): %v", b, err)
		}
	}
	uid, gid := pgcluster.PostgresUser(t)
	dir, err := os.MkdirTemp("", "leaseapi-failover-")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(dir, uid, gid); err != nil {
		t.Fatalf("chown %s to postgres (the suite runs as root): %v", dir, err)
	}
	c := &patroniCluster{t: t, dir: dir, sync: sync, uid: uint32(uid), gid: uint32(gid),
		httpc: &http.Client{Timeout: 2 * time.Second}}
	t.Cleanup(func() {
		c.stopAll()
		_ = os.RemoveAll(dir)
	})

	c.etcdPort, c.etcdPeer = freePort(t), freePort(t)
	if err := c.startEtcd(); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		n := &patroniNode{name: fmt.Sprintf("pg%d", i), dir: filepath.Join(dir, fmt.Sprintf("pg%d", i)),
			port: freePort(t), rest: freePort(t)}
		n.data = filepath.Join(n.dir, "data")
		if err := os.MkdirAll(n.dir, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(n.dir, uid, gid); err != nil {
			t.Fatal(err)
		}
		n.config = filepath.Join(n.dir, "patroni.yml")
		if err := os.WriteFile(n.config, []byte(c.patroniConfig(n)), 0o644); err != nil {
			t.Fatal(err)
		}
		c.nodes = append(c.nodes, n)
	}
	// The first node bootstraps the cluster; the others clone it.
	if err := c.startNode(c.nodes[0]); err != nil {
		t.Fatal(err)
	}
	if _, err := c.waitLeader(60*time.Second, ""); err != nil {
		t.Fatal(err)
	}
	for _, n := range c.nodes[1:] {
		if err := c.startNode(n); err != nil {
			t.Fatal(err)
		}
	}
	c.haproxyPort = freePort(t)
	if err := c.startHAProxy(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.waitHealthy(90 * time.Second); err != nil {
		t.Fatal(err)
	}
	return c
}

func (c *patroniCluster) startEtcd() error {
	data := filepath.Join(c.dir, "etcd")
	args := []string{
		"--name", "chaos", "--data-dir", data, "--enable-v2=true",
		"--listen-client-urls", fmt.Sprintf("http://127.0.0.1:%d", c.etcdPort),
		"--advertise-client-urls", fmt.Sprintf("http://127.0.0.1:%d", c.etcdPort),
		"--listen-peer-urls", fmt.Sprintf("http://127.0.0.1:%d", c.etcdPeer),
		"--initial-advertise-peer-urls", fmt.Sprintf("http://127.0.0.1:%d", c.etcdPeer),
		"--initial-cluster", fmt.Sprintf("chaos=http://127.0.0.1:%d", c.etcdPeer),
		"--unsafe-no-fsync",
	}
	p, err := startProc("etcd", etcdBin, args, baseEnv(), filepath.Join(c.dir, "etcd.log"))
	if err != nil {
		return err
	}
	c.etcd = p
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		resp, err := c.httpc.Get(fmt.Sprintf("http://127.0.0.1:%d/health", c.etcdPort))
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		if !p.alive() {
			return fmt.Errorf("etcd exited at start; see %s", filepath.Join(c.dir, "etcd.log"))
		}
		time.Sleep(100 * time.Millisecond)
	}
	return errors.New("etcd not healthy within 20s")
}

// patroniConfig is node n's patroni.yml.
func (c *patroniCluster) patroniConfig(n *patroniNode) string {
	return fmt.Sprintf(`scope: leaseapi-chaos
name: %[1]s
log:
  level: INFO
restapi:
  listen: 127.0.0.1:%[2]d
  connect_address: 127.0.0.1:%[2]d
etcd:
  host: 127.0.0.1:%[3]d
bootstrap:
  dcs:
    ttl: %[7]d
    loop_wait: %[8]d
    retry_timeout: %[9]d
    maximum_lag_on_failover: 1048576
    primary_start_timeout: 0
    synchronous_mode: %[6]t
    synchronous_mode_strict: %[6]t
    postgresql:
      use_pg_rewind: true
      use_slots: true
      parameters:
        wal_level: replica
        hot_standby: "on"
        wal_log_hints: "on"
        max_wal_senders: 10
        max_replication_slots: 10
        max_connections: 200
        shared_buffers: 32MB
  initdb:
    - encoding: UTF8
    - auth: trust
postgresql:
  listen: 127.0.0.1:%[4]d
  connect_address: 127.0.0.1:%[4]d
  data_dir: %[5]s
  bin_dir: %[10]s
  pgpass: %[11]s
  authentication:
    superuser:
      username: postgres
    replication:
      username: postgres
  parameters:
    unix_socket_directories: %[12]s
    fsync: "off"
    log_min_messages: warning
  pg_hba:
    - local all all trust
    - host all all 127.0.0.1/32 trust
    - host replication all 127.0.0.1/32 trust
`, n.name, n.rest, c.etcdPort, n.port, n.data, c.sync, patroniTTL, patroniLoopWait, patroniRetryWait,
		pg15Bin, filepath.Join(n.dir, "pgpass"), n.dir)
}

// startNode starts node n's Patroni (as postgres), which starts, clones or
// rewinds its Postgres.
func (c *patroniCluster) startNode(n *patroniNode) error {
	p, err := startProcIn(fmt.Sprintf("patroni %s", n.name), python3Bin, []string{patroniBin, n.config},
		append(baseEnv(), "HOME="+n.dir), filepath.Join(n.dir, "patroni.log"), &syscall.Credential{Uid: c.uid, Gid: c.gid}, n.dir)
	if err != nil {
		return err
	}
	n.patroni = p
	n.patroniProcs = append(n.patroniProcs, p)
	return nil
}

func (c *patroniCluster) startHAProxy() error {
	var servers strings.Builder
	for _, n := range c.nodes {
		fmt.Fprintf(&servers, "    server %s 127.0.0.1:%d maxconn 100 check port %d\n", n.name, n.port, n.rest)
	}
	conf := fmt.Sprintf(`global
    maxconn 400
defaults
    mode tcp
    timeout connect 2s
    timeout client 30m
    timeout server 30m
    timeout check 1s
listen primary
    bind 127.0.0.1:%d
    option httpchk GET /primary
    http-check expect status 200
    default-server inter 500ms fall 2 rise 1 on-marked-down shutdown-sessions
%s`, c.haproxyPort, servers.String())
	path := filepath.Join(c.dir, "haproxy.cfg")
	if err := os.WriteFile(path, []byte(conf), 0o644); err != nil {
		return err
	}
	p, err := startProc("haproxy", haproxyBin, []string{"-db", "-f", path}, baseEnv(), filepath.Join(c.dir, "haproxy.log"))
	if err != nil {
		return err
	}
	c.haproxy = p
	return nil
}

// multiHostDSN names the three nodes; lib/pq picks the read-write one.
func (c *patroniCluster) multiHostDSN(db string) string {
	var hosts, ports []string
	for _, n := range c.nodes {
		hosts = append(hosts, "127.0.0.1")
		ports = append(ports, strconv.Itoa(n.port))
	}
	return fmt.Sprintf("host=%s port=%s user=postgres dbname=%s sslmode=disable target_session_attrs=read-write connect_timeout=2",
		strings.Join(hosts, ","), strings.Join(ports, ","), db)
}

// haproxyDSN reaches the primary through HAProxy.
func (c *patroniCluster) haproxyDSN(db string) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable&connect_timeout=2", c.haproxyPort, db)
}

// members asks any answering node for the cluster's members.
func (c *patroniCluster) members() ([]patroniMember, error) {
	var last error
	for _, n := range c.nodes {
		resp, err := c.httpc.Get(fmt.Sprintf("http://127.0.0.1:%d/cluster", n.rest))
		if err != nil {
			last = err
			continue
		}
		var body struct {
			Members []patroniMember `json:"members"`
		}
		err = json.NewDecoder(resp.Body).Decode(&body)
		resp.Body.Close()
		if err != nil {
			last = err
			continue
		}
		return body.Members, nil
	}
	return nil, fmt.Errorf("no Patroni REST API answered: %v", last)
}

// leader is the running leader's member, or an error.
func (c *patroniCluster) leader() (patroniMember, error) {
	ms, err := c.members()
	if err != nil {
		return patroniMember{}, err
	}
	for _, m := range ms {
		if m.Role == "leader" && m.State == "running" {
			return m, nil
		}
	}
	return patroniMember{}, fmt.Errorf("no running leader among %+v", ms)
}

// waitLeader waits for a running leader other than not.
func (c *patroniCluster) waitLeader(d time.Duration, not string) (patroniMember, error) {
	deadline := time.Now().Add(d)
	var last error
	for time.Now().Before(deadline) {
		m, err := c.leader()
		if err == nil && m.Name != not {
			if c.primaryAnswers(m.Name) {
				return m, nil
			}
			err = fmt.Errorf("leader %s does not answer /primary yet", m.Name)
		} else if err == nil {
			err = fmt.Errorf("the leader is still %s", not)
		}
		last = err
		time.Sleep(200 * time.Millisecond)
	}
	return patroniMember{}, fmt.Errorf("no new leader within %s: %v", d, last)
}

func (c *patroniCluster) primaryAnswers(name string) bool {
	n := c.node(name)
	if n == nil {
		return false
	}
	resp, err := c.httpc.Get(fmt.Sprintf("http://127.0.0.1:%d/primary", n.rest))
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// waitHealthy waits until a leader runs, both other members stream from
// it (one as the synchronous standby in synchronous mode) on its
// timeline, and HAProxy reaches it.
func (c *patroniCluster) waitHealthy(d time.Duration) (patroniMember, error) {
	deadline := time.Now().Add(d)
	var last error
	for time.Now().Before(deadline) {
		last = c.healthy()
		if last == nil {
			return c.leader()
		}
		time.Sleep(300 * time.Millisecond)
	}
	ms, _ := c.members()
	return patroniMember{}, fmt.Errorf("cluster not healthy within %s: %v (members %+v)", d, last, ms)
}

func (c *patroniCluster) healthy() error {
	ms, err := c.members()
	if err != nil {
		return err
	}
	var lead *patroniMember
	syncs, streaming := 0, 0
	for i, m := range ms {
		switch {
		case m.Role == "leader" && m.State == "running":
			lead = &ms[i]
		case m.State == "streaming" || m.State == "running":
			streaming++
			if m.Role == "sync_standby" {
				syncs++
			}
		}
	}
	if lead == nil {
		return errors.New("no running leader")
	}
	if len(ms) != 3 || streaming != 2 {
		return fmt.Errorf("%d members, %d of them replicating", len(ms), streaming)
	}
	for _, m := range ms {
		if m.Timeline != lead.Timeline {
			return fmt.Errorf("%s is on timeline %d, the leader on %d", m.Name, m.Timeline, lead.Timeline)
		}
	}
	if c.sync && syncs == 0 {
		return errors.New("no synchronous standby")
	}
	if !c.primaryAnswers(lead.Name) {
		return fmt.Errorf("leader %s does not answer /primary", lead.Name)
	}
	return nil
}

func (c *patroniCluster) node(name string) *patroniNode {
	for _, n := range c.nodes {
		if n.name == name {
			return n
		}
	}
	return nil
}

// postmaster is the PID of node n's postmaster (0 when it is not running).
func (n *patroniNode) postmaster() int {
	b, err := os.ReadFile(filepath.Join(n.data, "postmaster.pid"))
	if err != nil {
		return 0
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(strings.SplitN(string(b), "\n", 2)[0]))
	if pid <= 0 || syscall.Kill(pid, 0) != nil {
		return 0
	}
	return pid
}

// postgresPIDs are node n's postmaster and its children, with their
// command lines.
func (n *patroniNode) postgresPIDs() map[int]string {
	out := map[int]string{}
	pm := n.postmaster()
	if pm == 0 {
		return out
	}
	out[pm] = "postmaster"
	for pid, ppid := range processParents() {
		if ppid == pm {
			cmd, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
			out[pid] = string(bytes.ReplaceAll(cmd, []byte{0}, []byte{' '}))
		}
	}
	return out
}

// walSenders are the PIDs of node n's WAL sender processes.
func (n *patroniNode) walSenders() []int {
	var out []int
	for pid, cmd := range n.postgresPIDs() {
		if strings.Contains(cmd, "walsender") {
			out = append(out, pid)
		}
	}
	return out
}

// processParents maps every process to its parent.
func processParents() map[int]int {
	out := map[int]int{}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces.
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(s[i+1:])
		if len(f) < 2 {
			continue
		}
		ppid, _ := strconv.Atoi(f[1])
		out[pid] = ppid
	}
	return out
}

func signalPIDs(pids []int, sig syscall.Signal) {
	for _, pid := range pids {
		_ = syscall.Kill(pid, sig)
	}
}

func keys(m map[int]string) []int {
	out := make([]int, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

// killNode SIGKILLs node n's Patroni and its Postgres processes.
func (c *patroniCluster) killNode(n *patroniNode) {
	pids := keys(n.postgresPIDs())
	n.patroni.kill()
	signalPIDs(pids, syscall.SIGKILL)
	c.waitGone(pids)
}

// waitGone waits (up to 10 s) for the processes to be gone.
func (c *patroniCluster) waitGone(pids []int) {
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		alive := false
		for _, pid := range pids {
			if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); err == nil && !strings.Contains(string(b), ") Z ") {
				alive = true
			}
		}
		if !alive {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// switchover asks the leader's Patroni for a planned switchover.
func (c *patroniCluster) switchover(leader string) error {
	n := c.node(leader)
	body, _ := json.Marshal(map[string]string{"leader": leader})
	// Patroni answers once the switchover is done.
	hc := &http.Client{Timeout: 60 * time.Second}
	resp, err := hc.Post(fmt.Sprintf("http://127.0.0.1:%d/switchover", n.rest), "application/json", bytes.NewReader(body))
	if err != nil {
		return err
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("switchover: %d %s", resp.StatusCode, b)
	}
	return nil
}

// stopAll ends every process of the cluster (cleanup).
func (c *patroniCluster) stopAll() {
	if c.haproxy != nil {
		c.haproxy.kill()
	}
	for _, n := range c.nodes {
		for _, p := range n.patroniProcs {
			p.kill()
		}
		pids := keys(n.postgresPIDs())
		signalPIDs(pids, syscall.SIGCONT)
		signalPIDs(pids, syscall.SIGKILL)
	}
	if c.etcd != nil {
		c.etcd.kill()
	}
}

// copyLogs keeps the cluster's logs in the artifacts.
func (c *patroniCluster) copyLogs(art string) {
	copyFile(filepath.Join(c.dir, "etcd.log"), filepath.Join(art, "etcd.log"))
	copyFile(filepath.Join(c.dir, "haproxy.log"), filepath.Join(art, "haproxy.log"))
	for _, n := range c.nodes {
		copyFile(filepath.Join(n.dir, "patroni.log"), filepath.Join(art, n.name+"-patroni.log"))
	}
}
