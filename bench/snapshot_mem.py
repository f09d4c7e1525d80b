"""Snapshot save: member RSS during `etcdctl snapshot save` (docs/BENCHMARKS.md).

Usage: python3 bench/snapshot_mem.py SERVER_BINARY NUM_KEYS  (10 KB values;
starts the server on free 127.0.0.1 ports in a temporary dir, fills it,
samples /proc/PID/status every 20 ms during the save, prints the peaks).
"""
import os, subprocess, sys, time, threading, socket, tempfile
import grpc
from etcd3.etcdrpc import rpc_pb2, rpc_pb2_grpc
def port():
    s=socket.socket(); s.bind(("127.0.0.1",0)); p=s.getsockname()[1]; s.close(); return p
binary=sys.argv[1]; n=int(sys.argv[2])
d=tempfile.mkdtemp(); P=port(); Q=port()
proc=subprocess.Popen([binary,"--data-dir",d+"/data","--listen-client-urls","http://127.0.0.1:%d"%P,"--advertise-client-urls","http://127.0.0.1:%d"%P,"--listen-peer-urls","http://127.0.0.1:%d"%Q,"--initial-advertise-peer-urls","http://127.0.0.1:%d"%Q,"--initial-cluster","default=http://127.0.0.1:%d"%Q,"--quota-backend-bytes",str(4<<30)],stdout=subprocess.DEVNULL,stderr=subprocess.DEVNULL)
time.sleep(2)
ch=grpc.insecure_channel("127.0.0.1:%d"%P); kv=rpc_pb2_grpc.KVStub(ch)
blob=os.urandom(10000)
for i in range(n): kv.Put(rpc_pb2.PutRequest(key=b"fill%06d"%i,value=blob),timeout=10)
def rss():
    out={}
    for l in open("/proc/%d/status"%proc.pid):
        if l.startswith(("VmRSS","RssAnon")): out[l.split(":")[0]]=int(l.split()[1])//1024
    return out
print("before", rss())
peak={"RssAnon":0,"VmRSS":0}; done=threading.Event()
def sampler():
    while not done.is_set():
        r=rss(); [peak.__setitem__(k,max(peak[k],r[k])) for k in peak]; time.sleep(0.02)
t=threading.Thread(target=sampler); t.start()
t0=time.monotonic()
subprocess.run(["etcdctl","--endpoints","127.0.0.1:%d"%P,"snapshot","save",d+"/s.db"],capture_output=True,check=True)
took=time.monotonic()-t0; done.set(); t.join()
print("save %.2f s, %d MB; peak during save MB:"%(took, os.path.getsize(d+"/s.db")>>20), peak, "after", rss())
proc.terminate(); proc.wait(); subprocess.run(["rm","-rf",d])
