"""``podfit feed``: the long-running command around ``Feeder``. SIGTERM and SIGINT stop it cleanly (exit 0);
configuration errors are one line and exit 1 (raised as ValueError for ``podfit.client.cli.main``)."""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal
import sys
from typing import Any

from podfit.client._requests import ChannelConfig
from podfit.client.aio import AsyncClient
from podfit.feed.feeder import Feeder
from podfit.feed.kinds import ALL_KINDS, KindSpec, select_kinds

log = logging.getLogger("podfit.feed")


class FeedConfigError(ValueError):
    """The Kubernetes connection cannot be configured."""


def load_api_client(kubeconfig: str | None, context: str | None, pool_size: int = 32) -> Any:
    """A ``kubernetes.client.ApiClient`` from the kubeconfig (or $KUBECONFIG), else the in-cluster config."""
    from kubernetes import client, config

    configuration = client.Configuration()
    try:
        if kubeconfig or os.environ.get("KUBECONFIG"):
            # config_file=None lets the client merge a colon-separated $KUBECONFIG as kubectl does.
            config.load_kube_config(
                config_file=kubeconfig, context=context, client_configuration=configuration, persist_config=False
            )
        elif context:
            raise FeedConfigError("--context needs a kubeconfig (--kubeconfig or $KUBECONFIG)")
        else:
            config.load_incluster_config(client_configuration=configuration)
    except config.ConfigException as exc:
        where = kubeconfig or os.environ.get("KUBECONFIG")
        if where:
            raise FeedConfigError(f"kubeconfig {where}: {exc}") from None
        raise FeedConfigError(
            f"no Kubernetes configuration: pass --kubeconfig FILE or run in a pod with a service account ({exc})"
        ) from None
    # One connection per watch and per concurrent list, without urllib3 discarding pooled connections.
    configuration.connection_pool_maxsize = pool_size
    # The feeder retries with its own backoff and one log line per attempt; urllib3's own retries would
    # add three more attempts, each logging a warning, for every request to an API server that is down.
    configuration.retries = 0
    return client.ApiClient(configuration)


def _meter_provider(exporter: str, interval_seconds: float) -> Any:
    if exporter == "none":
        return None
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import ConsoleMetricExporter, MetricExporter, PeriodicExportingMetricReader
    from opentelemetry.sdk.resources import Resource

    metric_exporter: MetricExporter
    if exporter == "console":
        metric_exporter = ConsoleMetricExporter()
    else:
        try:
            from opentelemetry.exporter.otlp.proto.grpc.metric_exporter import OTLPMetricExporter
        except ImportError:
            raise FeedConfigError(
                "--metrics-exporter otlp needs the 'otlp' extra (pip install 'podfit[otlp]')"
            ) from None
        metric_exporter = OTLPMetricExporter()
    reader = PeriodicExportingMetricReader(metric_exporter, export_interval_millis=interval_seconds * 1000)
    return MeterProvider(resource=Resource.create({"service.name": "podfit-feed"}), metric_readers=[reader])


def run(args: argparse.Namespace, channel: ChannelConfig) -> int:
    logging.basicConfig(
        level=args.log_level, format="%(asctime)s %(levelname)s %(name)s: %(message)s", stream=sys.stderr
    )
    kinds = select_kinds(args.kinds.split(",")) if args.kinds else ALL_KINDS
    if not kinds:
        raise FeedConfigError("--kinds names no kind")
    api = load_api_client(args.kubeconfig, args.context, pool_size=2 * len(kinds) + 4)
    meter_provider = _meter_provider(args.metrics_exporter, max(args.log_interval, 1.0))
    try:
        return asyncio.run(_serve(args, channel, api, kinds, meter_provider))
    finally:
        api.close()
        if meter_provider is not None:
            meter_provider.shutdown()


async def _serve(
    args: argparse.Namespace, channel: ChannelConfig, api: Any, kinds: tuple[KindSpec, ...], meter_provider: Any
) -> int:
    loop = asyncio.get_running_loop()
    main = asyncio.current_task()
    assert main is not None
    stopping = asyncio.Event()

    def stop(signum: int) -> None:
        log.info("%s: stopping", signal.Signals(signum).name)
        stopping.set()
        main.cancel()

    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop, signum)
    async with AsyncClient(config=channel) as client:
        feeder = Feeder(
            client,
            api,
            namespace=args.namespace,
            label_selector=args.selector,
            kinds=kinds,
            feeder_name=args.feeder_name,
            log_interval_seconds=args.log_interval,
            meter_provider=meter_provider,
        )
        log.info(
            "feeding %s from %s (%s)",
            channel.target,
            api.configuration.host,
            ", ".join(k.kind for k in kinds),
        )
        try:
            await feeder.run()
        except asyncio.CancelledError:
            if not stopping.is_set():
                raise
            log.info("stopped: %s", feeder.stats.summary())
    return 0
