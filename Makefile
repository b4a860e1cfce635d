# The two commands a fresh machine needs: `make run` and `make test`. Each does its own set-up.
PYTHON ?= python3
LOCAL := .local
KUBECONFIG_LOCAL := $(LOCAL)/kubeconfig

.PHONY: setup control-plane up down run test test-fast lint clean

setup:  ## install orksync and its test tools into the current Python
	$(PYTHON) -m pip install --quiet --disable-pip-version-check -e '.[test]'

control-plane:  ## build (once, cached outside the repo) etcd, kube-apiserver, kube-controller-manager, kubectl
	bash hack/build-control-plane.sh

up: setup control-plane  ## start the local control plane (kubeconfig in .local/kubeconfig)
	$(PYTHON) -m testbed.controlplane up --kubeconfig $(KUBECONFIG_LOCAL) \
		--state-dir $(LOCAL)/control-plane --controller-manager --reuse

down:  ## stop the local control plane
	-$(PYTHON) -m testbed.controlplane down --state-dir $(LOCAL)/control-plane

run: up  ## render and sync examples/repo into the local control plane, show what it made
	$(PYTHON) -m orksync render examples/repo -o $(LOCAL)/rendered
	$(PYTHON) -m orksync sync examples/repo --once --kubeconfig $(KUBECONFIG_LOCAL)
	@echo "(the control plane keeps running: 'make down' stops it)"
	@echo "--- orksync status"
	@$(PYTHON) -m orksync status --kubeconfig $(KUBECONFIG_LOCAL)
	@echo "--- orksync tree WebApp/team-a/shop"
	@$(PYTHON) -m orksync tree WebApp/team-a/shop --kubeconfig $(KUBECONFIG_LOCAL)

test: setup control-plane  ## the whole suite: unit, Go differential and cluster tests
	$(PYTHON) -m pytest -q

test-fast: setup  ## only the tests that need neither the control plane nor Go
	$(PYTHON) -m pytest -q -m 'not cluster and not go'

lint: setup
	$(PYTHON) -m ruff check orksync tests
	$(PYTHON) -m mypy orksync
	lint-imports

clean: down
	rm -rf $(LOCAL)
