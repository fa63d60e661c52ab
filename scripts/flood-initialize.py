#!/usr/bin/env python3
"""Flood a forkless server with `initialize` requests: N of them over 8 keep-alive
connections, pipelined by 8. Prints the count per HTTP status and the time taken.

Usage: python3 scripts/flood-initialize.py N [PORT]   (the server on 127.0.0.1:PORT, default 18600)
Used for the `max_sessions` figures in docs/benchmarks.md.
"""
import socket, sys, time, os
N=int(sys.argv[1]); port=int(sys.argv[2]) if len(sys.argv) > 2 else 18600
body=b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"f","version":"1"}}}'
req=b'POST /mcp HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\naccept: application/json, text/event-stream\r\ncontent-length: %d\r\n\r\n%s' % (len(body), body)
codes={}
socks=[socket.create_connection(("127.0.0.1",port)) for _ in range(8)]
bufs=[b""]*8
t=time.time(); sent=0
import selectors
def recv_resp(i):
    s=socks[i]
    while True:
        buf=bufs[i]
        h=buf.find(b"\r\n\r\n")
        if h>=0:
            head=buf[:h].decode()
            cl=0
            for line in head.split("\r\n")[1:]:
                k,_,v=line.partition(":")
                if k.lower()=="content-length": cl=int(v)
            if len(buf)>=h+4+cl:
                code=head.split(" ")[1]; bufs[i]=buf[h+4+cl:]
                return code
        d=s.recv(65536)
        if not d: raise SystemExit("closed")
        bufs[i]+=d
done=0
while done<N:
    for i in range(8):
        socks[i].sendall(req)
    for i in range(8):
        c=recv_resp(i); codes[c]=codes.get(c,0)+1
    done+=8
print(codes, "in %.1fs"%(time.time()-t))
