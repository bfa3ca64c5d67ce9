//! Workloads that come from the library's user: a blocking closure, an async closure, or any
//! type implementing [`Workload`], registered under a name of its own before a [`crate::Lab`]
//! runs. Registration is process-wide on purpose: every part of the pipeline that turns a
//! spec into a workload ([`super::parse`]: the plan, the run child, a spawned task, a job
//! queue's worker) finds them there, in the parent and in the fresh processes of the user's
//! binary alike, without a second path for them.

use std::future::Future;
use std::sync::{Arc, OnceLock, RwLock};

use super::{guarded_run, CatchPanic, Nature, TaskError, TaskFuture, Workload, REGISTRY};

fn registered() -> &'static RwLock<Vec<Arc<dyn Workload>>> {
    static CUSTOM: OnceLock<RwLock<Vec<Arc<dyn Workload>>>> = OnceLock::new();
    CUSTOM.get_or_init(|| RwLock::new(Vec::new()))
}

/// Registers `w` under its spec so that [`super::parse`] finds it; registering the same spec
/// again replaces the earlier one. The spec must not name a built-in workload.
pub fn register(w: Arc<dyn Workload>) -> Result<(), String> {
    let spec = w.spec();
    let name = spec.split(':').next().unwrap_or_default();
    if spec.is_empty() || spec.chars().any(char::is_whitespace) {
        return Err(format!(
            "workload name '{spec}' must be non-empty and without spaces"
        ));
    }
    if REGISTRY.iter().any(|e| e.name == name) {
        return Err(format!(
            "workload name '{spec}' is taken by the built-in workload '{name}'; choose another"
        ));
    }
    let mut list = registered().write().unwrap_or_else(|p| p.into_inner());
    list.retain(|x| x.spec() != spec);
    list.push(w);
    Ok(())
}

/// The registered workload whose spec is `spec`, if any.
pub(crate) fn find(spec: &str) -> Option<Arc<dyn Workload>> {
    registered()
        .read()
        .unwrap_or_else(|p| p.into_inner())
        .iter()
        .find(|w| w.spec() == spec)
        .cloned()
}

/// What a user's task may return: nothing, a byte count (the task's checksum share), or a
/// `Result` whose error becomes a failed task with its message.
pub trait TaskOutput {
    /// The task's bytes, or why it failed.
    fn into_bytes(self) -> Result<u64, TaskError>;
}

impl TaskOutput for () {
    fn into_bytes(self) -> Result<u64, TaskError> {
        Ok(0)
    }
}

impl TaskOutput for u64 {
    fn into_bytes(self) -> Result<u64, TaskError> {
        Ok(self)
    }
}

impl TaskOutput for usize {
    fn into_bytes(self) -> Result<u64, TaskError> {
        Ok(self as u64)
    }
}

impl<T: TaskOutput, E: std::fmt::Display> TaskOutput for Result<T, E> {
    fn into_bytes(self) -> Result<u64, TaskError> {
        match self {
            Ok(t) => t.into_bytes(),
            Err(e) => Err(TaskError::new("error", e.to_string())),
        }
    }
}

type BlockingFn = dyn Fn(usize) -> Result<u64, TaskError> + Send + Sync;
type AsyncFn = dyn Fn(usize) -> TaskFuture + Send + Sync;

/// A workload made of a closure of the user's: blocking, or async (which the async models run
/// natively, as the `http` workload's requests, and the others on a small runtime of their
/// own thread).
pub struct FnWorkload {
    name: String,
    nature: Nature,
    blocking: Option<Arc<BlockingFn>>,
    future: Option<Arc<AsyncFn>>,
}

impl FnWorkload {
    /// A blocking closure: task `i` is `f(i)`.
    pub fn blocking<F, T>(name: &str, nature: Nature, f: F) -> FnWorkload
    where
        F: Fn(usize) -> T + Send + Sync + 'static,
        T: TaskOutput,
    {
        FnWorkload {
            name: name.to_string(),
            nature,
            blocking: Some(Arc::new(move |i| f(i).into_bytes())),
            future: None,
        }
    }

    /// An async closure: task `i` is `f(i).await`.
    pub fn future<F, Fut, T>(name: &str, nature: Nature, f: F) -> FnWorkload
    where
        F: Fn(usize) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = T> + Send + 'static,
        T: TaskOutput,
    {
        FnWorkload {
            name: name.to_string(),
            nature,
            blocking: None,
            future: Some(Arc::new(move |i| {
                let fut = f(i);
                Box::pin(async move { fut.await.into_bytes() })
            })),
        }
    }
}

thread_local! {
    /// A current-thread runtime per OS thread, for async closures under blocking models.
    static RUNTIME: Option<tokio::runtime::Runtime> = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .ok();
}

impl Workload for FnWorkload {
    fn spec(&self) -> String {
        self.name.clone()
    }
    fn nature(&self) -> Nature {
        self.nature
    }
    fn task(&self, index: usize) -> Result<u64, TaskError> {
        if let Some(f) = &self.blocking {
            return f(index);
        }
        let Some(f) = &self.future else {
            return Err(TaskError::new("error", "a workload without a task"));
        };
        RUNTIME.with(|rt| match rt {
            Some(rt) => rt.block_on(CatchPanic(f(index))),
            None => Err(TaskError::new("error", "could not start a tokio runtime")),
        })
    }
    fn task_async(self: Arc<Self>, index: usize) -> TaskFuture {
        match (&self.future, self.nature) {
            // A panic is caught by the model's `run_task_async`, as for every async task.
            (Some(f), _) => f(index),
            // Computation, or a nature left to measure: inline on the event loop, as a naive
            // async program runs a plain function.
            (None, Nature::Cpu | Nature::Measured) => {
                Box::pin(async move { guarded_run(&*self, index) })
            }
            (None, _) => Box::pin(async move {
                tokio::task::spawn_blocking(move || guarded_run(&*self, index))
                    .await
                    .map_err(|e| TaskError::new("panic", e.to_string()))?
            }),
        }
    }
    fn portable(&self) -> bool {
        false
    }
}
