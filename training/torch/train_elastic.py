"""Horovod elastic training with PyTorch: workers may leave (or join) while the run goes on.

    horovodrun -np 2 --min-np 1 --max-np 2 --host-discovery-script ./hosts.sh \\
        python -m training.torch.train_elastic --model tiny --image-size 32 ...

Same model, optimizer, data and step as `training.torch.train`, under `hvd.elastic.TorchState`
(docs/architecture.md, "Elastic training").
"""

import sys
from pathlib import Path

import torch

from training import checkpoints, events, options, worker
from training.throughput import ThroughputMeter
from training.torch import distributed
from training.torch.train import FRAMEWORK, Data, Trainer, set_threads


def build_parser():
    parser = options.build_parser(FRAMEWORK)
    parser.prog = "python -m training.torch.train_elastic"
    parser.add_argument(
        "--commit-every",
        type=options._at_least(1),
        default=5,
        help="steps between elastic state commits: a lost worker costs at most this many steps",
    )
    return parser


def scaler_handler():
    """A TorchState handler for the fp16 GradScaler: its scale and growth counter are saved on
    commit, restored on rollback and broadcast from rank 0 on sync, like the optimizer's state
    (horovod/torch/elastic/state.py has handlers for modules, optimizers and samplers only)."""
    import copy

    from horovod.torch import broadcast_object
    from horovod.torch.elastic.state import StateHandler

    class GradScalerHandler(StateHandler):
        def __init__(self, scaler):
            super().__init__(scaler)
            self.save()

        def save(self):
            self._saved = copy.deepcopy(self.value.state_dict())

        def restore(self):
            self.value.load_state_dict(self._saved)

        def sync(self):
            self.value.load_state_dict(broadcast_object(self.value.state_dict(), root_rank=0))

    return GradScalerHandler


class ElasticRun:
    def __init__(self, args, workers: distributed.Horovod):
        self.args, self.hvd = args, workers.hvd
        set_threads(args, workers.local_size)
        self.device = workers.device
        self.trainer = Trainer(args, workers)
        self.started_with = workers.size
        self.resets = 0
        self.checkpoint = None

    def _new_world(self, state) -> None:
        """Data slices (the stream going on from the state's step), LR and throughput meter for
        the current rank and number of workers. Inside the elastic function: counting shards is
        collective."""
        a, hvd, size = self.args, self.hvd, self.hvd.size()
        events.rank_is(hvd.rank())
        self.data = Data(a, hvd.rank(), size, hvd.local_size(), self.device, hvd.allgather_object)
        self.data.start_at(state.global_step * a.grad_accum)
        self.trainer.rescale(size)
        self.meter = ThroughputMeter(a.batch_size * a.grad_accum * size, a.timing_warmup_steps)

    def on_reset(self) -> None:
        self.resets += 1
        set_threads(self.args, self.hvd.local_size())
        if self.hvd.rank() == 0:
            print(f"workers changed: now {self.hvd.size()} (reset {self.resets})", flush=True)

    def loop(self, state) -> None:
        """The training loop `@hvd.elastic.run` restarts from the last commit after a reset."""
        a, hvd = self.args, self.hvd
        self._new_world(state)
        # The same fraction of the epoch if the number of workers (steps per epoch) changed.
        steps = self.data.steps_per_epoch
        state.step = checkpoints.rescale_step(state.step, state.epoch_steps, steps)
        state.epoch_steps = steps
        while state.epoch < a.epochs:
            while state.step < steps:
                self.trainer.set_lr(state.epoch + state.step / steps)
                self.meter.begin()
                # A Python number for the elastic state (a commit saves it): one host sync per
                # step, which elastic training accepts for commits that can roll back anywhere.
                loss = float(self.trainer.step(self.data.train)[0])
                self.meter.end()
                state.step += 1
                state.global_step += 1
                events.step(state.global_step, a.batch_size * a.grad_accum * hvd.size())
                state.loss_sum += loss
                due = checkpoints.due(state.global_step, a.checkpoint_every_steps)
                if hvd.rank() == 0 and due and state.step < steps:  # mid-epoch checkpoint
                    self.checkpoint = self.trainer.save(
                        Path(a.checkpoint_dir), state.epoch, state.global_step, state.step, steps
                    )
                if state.step % a.commit_every == 0:
                    state.commit()
            # Elastic runs print no straggler line (docs/jobs.md, "Stragglers"): the epoch's
            # compute times are dropped, so that a GPU's timing events do not pile up.
            self.trainer.clock.take_epoch()
            mean_loss = float(
                hvd.allreduce(torch.tensor(state.loss_sum / steps), name="epoch-loss")
            )
            lr = self.trainer.optimizer.param_groups[0]["lr"]
            if hvd.rank() == 0:
                print(
                    f"epoch {state.epoch + 1}/{a.epochs} - loss: {mean_loss:.4f} - lr: {lr:.5g} "
                    f"- workers: {hvd.size()}",
                    flush=True,
                )
                events.epoch(state.epoch + 1, {"loss": mean_loss, "lr": lr})  # no EpochLog here
                if a.checkpoint_dir:
                    self.checkpoint = self.trainer.save(
                        Path(a.checkpoint_dir), state.epoch + 1, state.global_step
                    )
            state.epoch += 1
            state.step = 0
            state.loss_sum = 0.0
            state.commit()


def train(args) -> None:
    from horovod.torch.elastic.state import get_handler_registry, set_handler_registry

    workers = distributed.Horovod()
    events.started()
    hvd = workers.hvd
    run = ElasticRun(args, workers)
    progress = run.trainer.restore(args.checkpoint_dir)
    set_handler_registry([*get_handler_registry(), (torch.amp.GradScaler, scaler_handler())])
    state = hvd.elastic.TorchState(
        model=run.trainer.model,
        optimizer=run.trainer.optimizer,
        scaler=run.trainer.scaler,
        epoch=progress.epoch if progress else 0,
        step=progress.step if progress else 0,
        global_step=progress.global_step if progress else 0,
        epoch_steps=progress.steps_per_epoch if progress else 0,
        loss_sum=0.0,
    )
    state.register_reset_callbacks([run.on_reset])
    hvd.elastic.run(run.loop)(state)
    events.end(state.global_step)

    workers = hvd.size()
    if hvd.rank() == 0:
        print(
            f"Elastic run finished with {workers} worker(s) "
            f"(started with {run.started_with}, {run.resets} reset(s))",
            flush=True,
        )
    if args.dump_weights:
        run.trainer.dump_weights(args.dump_weights)
    worker.report(args, FRAMEWORK, run.meter, run.data.source, workers, hvd.rank(), run.checkpoint)


def main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if problem := options.check_combinations(FRAMEWORK, args):
        parser.error(problem)
    return worker.run_main(train, args)


if __name__ == "__main__":
    sys.exit(main())
