"""PPO on jaxode's cart-pole: balance the pole (mean return >= 450 of 500) on a CPU.

Proximal policy optimisation (Schulman et al. 2017) in plain JAX + optax:
actor and critic are separate tanh MLPs (two hidden layers of 64); a rollout
of ``--steps`` env steps in ``--envs`` worlds at once (``jax.vmap`` of
``env.step`` under ``lax.scan``, with ``jaxode.envs.AutoReset``), advantages
by GAE(gamma, lambda), then ``--epochs`` passes of minibatch Adam steps on
the clipped surrogate + value loss - entropy bonus. Rollout and update are one
jitted function; the Python loop only prints the learning curve: the mean
return of the episodes that ended during each rollout.

Time limits: an episode cut at 500 steps (``info["truncation"]``) is not a
failure; its last step bootstraps with the value of its own state (the next
state is already the new episode's).

At the end the greedy policy (argmax) runs 500 steps in 64 fresh worlds; the
script prints their mean return and the wall time.

Run:  python examples/train_cartpole.py [--timesteps 400000] [--envs 64] [--seed 0]
"""
from __future__ import annotations

import argparse
import time
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax

import jaxode.tools.envs as envs


# ----------------------------------------------------------------- networks
def init_mlp(key, sizes, last_scale):
    """Orthogonally initialised dense layers [(W, b), ...]; the last layer's
    weights scaled by ``last_scale`` (small for the policy head)."""
    layers = []
    keys = jax.random.split(key, len(sizes) - 1)
    for i, (k, n_in, n_out) in enumerate(zip(keys, sizes[:-1], sizes[1:])):
        scale = last_scale if i == len(sizes) - 2 else np.sqrt(2.0)
        w = jax.nn.initializers.orthogonal(scale)(k, (n_in, n_out), jnp.float32)
        layers.append((w, jnp.zeros((n_out,), jnp.float32)))
    return layers


def mlp(layers, x):
    for w, b in layers[:-1]:
        x = jnp.tanh(x @ w + b)
    w, b = layers[-1]
    return x @ w + b


def policy_value(params, obs):
    """(action logits, state value) for a batch of observations."""
    return mlp(params["actor"], obs), mlp(params["critic"], obs)[..., 0]


class Transition(NamedTuple):
    obs: jax.Array
    action: jax.Array
    logp: jax.Array
    value: jax.Array
    reward: jax.Array
    done: jax.Array
    truncation: jax.Array


def make_train(args):
    env = envs.AutoReset(envs.make("cartpole"))
    n_obs, n_act = env.observation_size, env.num_actions
    batch = args.envs * args.steps
    minibatch = batch // args.minibatches
    n_updates = args.timesteps // batch
    schedule = optax.linear_schedule(args.lr, 0.0, n_updates * args.epochs * args.minibatches)
    tx = optax.chain(optax.clip_by_global_norm(args.max_grad_norm),
                     optax.adam(schedule, eps=1e-5))

    @jax.jit
    def init(key):
        ka, kc, ke, key = jax.random.split(key, 4)
        params = {"actor": init_mlp(ka, [n_obs, 64, 64, n_act], 0.01),
                  "critic": init_mlp(kc, [n_obs, 64, 64, 1], 1.0)}
        states = env.reset_batch(jax.random.split(ke, args.envs))
        ep_return = jnp.zeros((args.envs,), jnp.float32)
        return params, tx.init(params), states, ep_return, key

    def rollout(params, states, ep_return, key):
        def one(carry, k):
            states, ep_return = carry
            obs = states.obs.astype(jnp.float32)
            logits, value = policy_value(params, obs)
            action = jax.random.categorical(k, logits)
            logp = jax.nn.log_softmax(logits)[jnp.arange(args.envs), action]
            states = env.step_batch(states, action)
            ep_return = ep_return + states.reward
            t = Transition(obs, action, logp, value, states.reward, states.done,
                           states.info["truncation"])
            finished = (jnp.sum(jnp.where(states.done, ep_return, 0.0)), jnp.sum(states.done))
            return (states, jnp.where(states.done, 0.0, ep_return)), (t, finished)

        keys = jax.random.split(key, args.steps)
        (states, ep_return), (traj, finished) = jax.lax.scan(one, (states, ep_return), keys)
        return states, ep_return, traj, finished

    def gae(traj: Transition, last_value):
        """Generalised advantage estimates and value targets (time-major)."""
        next_value = jnp.concatenate([traj.value[1:], last_value[None]], axis=0)
        # at a time limit the next obs belongs to the new episode: bootstrap
        # with the value of the last state of the cut episode instead
        next_value = jnp.where(traj.truncation, traj.value, next_value)
        terminal = traj.done & ~traj.truncation
        delta = traj.reward + args.gamma * next_value * (1.0 - terminal) - traj.value

        def back(adv, x):
            d, done = x
            adv = d + args.gamma * args.gae_lambda * (1.0 - done) * adv
            return adv, adv

        _, adv = jax.lax.scan(back, jnp.zeros_like(last_value), (delta, traj.done), reverse=True)
        return adv, adv + traj.value

    def loss_fn(params, mb):
        obs, action, logp_old, value_old, adv, target = mb
        logits, value = policy_value(params, obs)
        logp_all = jax.nn.log_softmax(logits)
        logp = jnp.take_along_axis(logp_all, action[:, None], axis=1)[:, 0]
        ratio = jnp.exp(logp - logp_old)
        adv = (adv - adv.mean()) / (adv.std() + 1e-8)
        pg = -jnp.mean(jnp.minimum(ratio * adv,
                                   jnp.clip(ratio, 1 - args.clip, 1 + args.clip) * adv))
        v_clip = value_old + jnp.clip(value - value_old, -args.clip, args.clip)
        v_loss = 0.5 * jnp.mean(jnp.maximum((value - target) ** 2, (v_clip - target) ** 2))
        entropy = -jnp.mean(jnp.sum(jnp.exp(logp_all) * logp_all, axis=-1))
        return pg + args.vf_coef * v_loss - args.ent_coef * entropy

    @jax.jit
    def update(runner):
        params, opt_state, states, ep_return, key = runner
        key, k_roll, k_perm = jax.random.split(key, 3)
        states, ep_return, traj, (ret_sum, n_done) = rollout(params, states, ep_return, k_roll)
        _, last_value = policy_value(params, states.obs.astype(jnp.float32))
        adv, target = gae(traj, last_value)
        data = (traj.obs, traj.action, traj.logp, traj.value, adv, target)
        data = jax.tree.map(lambda x: x.reshape((batch,) + x.shape[2:]), data)

        def epoch(carry, k):
            params, opt_state = carry
            perm = jax.random.permutation(k, batch)
            mbs = jax.tree.map(lambda x: x[perm].reshape((args.minibatches, minibatch)
                                                         + x.shape[1:]), data)

            def sgd(carry, mb):
                params, opt_state = carry
                grads = jax.grad(loss_fn)(params, mb)
                upd, opt_state = tx.update(grads, opt_state, params)
                return (optax.apply_updates(params, upd), opt_state), None

            return jax.lax.scan(sgd, (params, opt_state), mbs)[0], None

        (params, opt_state), _ = jax.lax.scan(epoch, (params, opt_state),
                                              jax.random.split(k_perm, args.epochs))
        stats = (ret_sum.sum() / jnp.maximum(n_done.sum(), 1), n_done.sum())
        return (params, opt_state, states, ep_return, key), stats

    return env, init, update, n_updates


def evaluate(env, params, key, n_worlds=64):
    """Mean return of the greedy policy over one episode in each of ``n_worlds``."""
    base = env.env  # no auto-reset: a world stops counting when its episode ends

    @jax.jit
    def run(key):
        states = base.reset_batch(jax.random.split(key, n_worlds))

        def one(carry, _):
            states, ret, alive = carry
            logits, _ = policy_value(params, states.obs.astype(jnp.float32))
            states = base.step_batch(states, jnp.argmax(logits, axis=-1))
            ret = ret + jnp.where(alive, states.reward, 0.0)
            return (states, ret, alive & ~states.done), None

        init = (states, jnp.zeros((n_worlds,)), jnp.ones((n_worlds,), bool))
        (_, ret, _), _ = jax.lax.scan(one, init, None, length=base.episode_length)
        return ret

    return np.asarray(run(key))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--timesteps", type=int, default=400_000)
    ap.add_argument("--envs", type=int, default=64)
    ap.add_argument("--steps", type=int, default=64, help="rollout length per update")
    ap.add_argument("--epochs", type=int, default=4)
    ap.add_argument("--minibatches", type=int, default=4)
    ap.add_argument("--lr", type=float, default=2.5e-3)
    ap.add_argument("--gamma", type=float, default=0.99)
    ap.add_argument("--gae-lambda", type=float, default=0.95)
    ap.add_argument("--clip", type=float, default=0.2)
    ap.add_argument("--vf-coef", type=float, default=0.5)
    ap.add_argument("--ent-coef", type=float, default=0.01)
    ap.add_argument("--max-grad-norm", type=float, default=0.5)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()

    t_start = time.perf_counter()
    env, init, update, n_updates = make_train(args)
    print(f"{env}\nPPO: {args.envs} worlds x {args.steps} steps per update, {n_updates} updates "
          f"({n_updates * args.envs * args.steps:,} env steps)")
    runner = init(jax.random.PRNGKey(args.seed))
    jax.block_until_ready(runner)
    print(f"build + first reset: {time.perf_counter() - t_start:.1f} s")
    t0 = time.perf_counter()
    runner, stats = update(runner)
    jax.block_until_ready(stats)
    print(f"compile + first update: {time.perf_counter() - t0:.1f} s")
    print(" update  env steps   mean return  episodes   wall [s]")
    for i in range(1, n_updates):
        runner, stats = update(runner)
        if i % 5 == 0 or i == n_updates - 1:
            ret, n = (float(x) for x in stats)
            print(f"  {i:5d}  {(i + 1) * args.envs * args.steps:9,d}   {ret:11.1f}  {int(n):8d}"
                  f"   {time.perf_counter() - t_start:8.1f}")
    t_train = time.perf_counter() - t_start
    returns = evaluate(env, runner[0], jax.random.PRNGKey(args.seed + 1))
    print(f"training wall time {t_train:.1f} s (compile included)")
    print(f"greedy policy: mean return {returns.mean():.1f} of {env.episode_length} over "
          f"{returns.size} episodes (min {returns.min():.0f})")
    print(f"total wall time {time.perf_counter() - t_start:.1f} s")


if __name__ == "__main__":
    main()
