"""The same reads as benches/azure.rs, made directly with Microsoft's Azure
Tables SDK for Python (azure-data-tables) against the same table.

    python azure_sdk.py CONNECTION_STRING TABLE point|range THREADS SECONDS ROWS

Prints one JSON line: queries per second, p50 and p99 latency in ms.
"""

import json
import random
import sys
import threading
import time

from azure.data.tables import TableClient

PER_PARTITION = 1000


def keys(x):
    return f"p{x // PER_PARTITION}", f"{x:010d}"


def main():
    connection, table, mode, threads, seconds, rows = sys.argv[1:7]
    threads, seconds, rows = int(threads), float(seconds), int(rows)
    latencies = []
    lock = threading.Lock()
    deadline = time.perf_counter() + seconds

    def run(seed):
        client = TableClient.from_connection_string(connection, table_name=table)
        rng = random.Random(seed)
        mine = []
        while time.perf_counter() < deadline:
            started = time.perf_counter()
            if mode == "point":
                pk, rk = keys(rng.randrange(rows))
                entity = client.get_entity(partition_key=pk, row_key=rk)
                assert entity["RowKey"] == rk
            else:
                first = rng.randrange(rows // PER_PARTITION) * PER_PARTITION
                first += rng.randrange(PER_PARTITION - 100)
                pk, low = keys(first)
                _, high = keys(first + 100)
                found = list(
                    client.query_entities(
                        "PartitionKey eq @pk and RowKey ge @low and RowKey lt @high",
                        parameters={"pk": pk, "low": low, "high": high},
                    )
                )
                assert len(found) == 100, len(found)
            mine.append(time.perf_counter() - started)
        with lock:
            latencies.extend(mine)

    workers = [threading.Thread(target=run, args=(i,)) for i in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    latencies.sort()
    count = len(latencies)
    print(
        json.dumps(
            {
                "qps": count / seconds,
                "p50_ms": 1000 * latencies[count // 2],
                "p99_ms": 1000 * latencies[min(count - 1, count * 99 // 100)],
            }
        )
    )


main()
