#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""fake_apiserver.py - the test API server (gpuqos_test.apiserver) as a
program, the way the kube tests' C harness starts it ($KUBE_FAKE_APISERVER):

    PYTHONPATH=tests/lib fake_apiserver.py --port-file F [--token T]
        [--tls-cert C --tls-key K]

It writes its port to F once listening and serves until killed.
"""
from gpuqos_test.apiserver import main

if __name__ == "__main__":
    main()
