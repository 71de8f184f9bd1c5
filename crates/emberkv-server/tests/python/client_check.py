"""Drives emberkv-server with Python's redis package (redis-py).

Usage: python3 client_check.py PORT UNIX_SOCKET
Exits 0 and prints "ok" when every check passes; raises otherwise.
"""

import sys
import threading
import time

import redis


def check(r, name):
    r.flushdb()
    assert r.ping() is True
    assert r.set("k", "v") is True
    assert r.get("k") == b"v"
    assert r.get("missing") is None
    assert r.set("k", "w", nx=True) is None
    assert r.set("k", "w", xx=True, get=True) == b"v"
    assert r.set("t", "v", ex=100) is True
    assert 98 <= r.ttl("t") <= 100
    assert r.pttl("missing") == -2
    assert r.persist("t") is True
    assert r.ttl("t") == -1
    assert r.mset({"a": "1", "b": "2"}) is True
    assert r.mget(["a", "missing", "b"]) == [b"1", None, b"2"]
    assert r.msetnx({"a": "x", "c": "3"}) is False
    assert r.incr("n") == 1
    assert r.incrby("n", 9) == 10
    assert r.decr("n") == 9
    assert r.incrbyfloat("f", 1.5) == 1.5
    assert r.append("s", "ab") == 2
    assert r.strlen("s") == 2
    assert r.getrange("s", 0, 0) == b"a"
    assert r.setrange("s", 1, "Z") == 2
    assert r.getset("s", "new") == b"aZ"
    assert r.getdel("s") == b"new"
    assert r.getex("k", ex=50) == b"w"
    assert r.expire("k", 200) is True
    assert r.exists("k", "a", "missing") == 2
    assert r.type("k") == b"string"
    assert r.delete("a", "b", "missing") == 2
    assert sorted(r.keys("*")) == sorted([b"k", b"t", b"n", b"f"])
    assert sorted(r.scan_iter(match="*", count=2)) == sorted(r.keys("*"))
    assert r.randomkey() in r.keys("*")
    assert r.dbsize() == 4
    binary = b"\x00\r\n\xff"
    assert r.set(binary, binary) is True
    assert r.get(binary) == binary
    # A non-transactional pipeline of 1,000 commands.
    pipe = r.pipeline(transaction=False)
    for i in range(1000):
        pipe.set(f"p:{i}", i)
    for i in range(1000):
        pipe.get(f"p:{i}")
    results = pipe.execute()
    assert results[:1000] == [True] * 1000
    assert results[1000:] == [str(i).encode() for i in range(1000)]
    info = r.info()
    assert info["redis_version"] == "7.0.0"
    assert "db0" in info and info["db0"]["keys"] == r.dbsize()
    assert r.config_get("maxclients")["maxclients"] == "10000"
    assert r.client_setname("py-" + name) is True
    assert r.client_getname() in ("py-" + name, b"py-" + name.encode())
    assert any(c["name"] == "py-" + name for c in r.client_list())
    assert isinstance(r.client_id(), int)
    t = r.time()
    assert abs(t[0] - time.time()) < 5
    try:
        r.execute_command("NOSUCH")
        raise AssertionError("an unknown command must fail")
    except redis.ResponseError as e:
        assert "unknown command" in str(e)
    assert r.ping() is True
    assert r.set("exp", "v", px=100) is True
    time.sleep(0.3)
    assert r.get("exp") is None
    # FLUSHALL removes expired keys too (DBSIZE counts them until then).
    assert r.flushall() is True
    assert r.dbsize() == 0


def check_transactions(r, other):
    """MULTI/EXEC through pipeline() and transaction(), WATCH retries."""
    r.delete("tx:a", "tx:n", "tx:w")
    # pipeline() wraps its commands in MULTI/EXEC by default.
    pipe = r.pipeline()
    pipe.set("tx:a", "1").incr("tx:n").incr("tx:n").get("tx:a")
    assert pipe.execute() == [True, 1, 2, b"1"]
    # An error inside the transaction is that command's result; the
    # others run.
    pipe = r.pipeline()
    pipe.set("tx:s", "x").incr("tx:s").set("tx:t", "1")
    results = pipe.execute(raise_on_error=False)
    assert results[0] is True and results[2] is True
    assert isinstance(results[1], redis.ResponseError)
    # A command refused while queuing aborts the whole transaction.
    pipe = r.pipeline()
    pipe.set("tx:never", "1").execute_command("NOSUCH")
    try:
        pipe.execute()
        raise AssertionError("EXECABORT expected")
    except redis.ResponseError as e:
        assert "EXECABORT" in str(e) or "unknown command" in str(e), e
    assert r.exists("tx:never") == 0
    # WATCH, then another client writes the key: WatchError, nothing runs.
    with r.pipeline() as pipe:
        pipe.watch("tx:w")
        other.set("tx:w", "theirs")
        pipe.multi()
        pipe.set("tx:w", "mine")
        try:
            pipe.execute()
            raise AssertionError("WatchError expected")
        except redis.WatchError:
            pass
    assert r.get("tx:w") == b"theirs"
    # transaction(): WATCH, read, queue, retried until EXEC runs.
    attempts = []

    def add_one(pipe):
        current = int(pipe.get("tx:w2") or 0)
        attempts.append(current)
        if len(attempts) < 3:
            other.incrby("tx:w2", 100)
        pipe.multi()
        pipe.set("tx:w2", current + 1)

    r.delete("tx:w2")
    assert r.transaction(add_one, "tx:w2") == [True]
    assert attempts == [0, 100, 200]
    assert r.get("tx:w2") == b"201"
    # Many transactions of two INCRs from two clients at once: each EXEC's
    # INCRs are adjacent.
    errors = []

    def incr_pairs(client):
        try:
            for _ in range(100):
                pipe = client.pipeline()
                a, b = pipe.incr("tx:pair").incr("tx:pair").execute()
                assert b == a + 1, (a, b)
        except Exception as e:  # reported below
            errors.append(e)

    r.delete("tx:pair")
    threads = [threading.Thread(target=incr_pairs, args=(c,)) for c in (r, other)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    assert r.get("tx:pair") == b"400"


def main():
    port, sock = int(sys.argv[1]), sys.argv[2]
    check(redis.Redis(host="127.0.0.1", port=port), "tcp")
    check(redis.Redis(unix_socket_path=sock), "unix")
    check_transactions(
        redis.Redis(host="127.0.0.1", port=port), redis.Redis(unix_socket_path=sock)
    )
    # RESP3, where this redis-py supports it.
    try:
        r3 = redis.Redis(host="127.0.0.1", port=port, protocol=3)
    except TypeError:
        r3 = None
    if r3 is not None:
        assert r3.set("k3", "v") is True
        assert r3.get("k3") == b"v"
        assert r3.get("missing") is None
        assert r3.config_get("port")["port"] == str(port)
        check_transactions(r3, redis.Redis(host="127.0.0.1", port=port, protocol=3))
    print("ok")


if __name__ == "__main__":
    main()
