//! Wrappers of a backend that change one or two things about it (pace its runs, fail them on
//! purpose, alter their results) and forward the rest.
//!
//! A wrapper says what it changes in [`Wrap`], whose hooks default to changing nothing, and
//! [`Wrapped`] (the backend) and [`WrappedExecutable`] (each executable it compiles) implement
//! [`Backend`] and [`Executable`] once for every wrapper, forwarding every method, so no
//! wrapper re-forwards the traits by hand and a method added to them is forwarded everywhere
//! by one change here. They are structs rather than blanket impls over `W: Wrap` because such
//! an impl would overlap the blanket impls for [`BlockingBackend`](super::BlockingBackend) and
//! [`BlockingExecutable`](super::BlockingExecutable).

use std::collections::HashMap;
use std::future::Future;

use super::{Backend, BoxFuture, Chain, Executable, Plan, Weights};
use crate::error::Result;
use crate::tensor::Tensor;

/// The method of [`Executable`] a wrapped executable is asked to run ([`Wrap::before`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Call {
    /// [`Executable::run`].
    Run,
    /// [`Executable::run_repeatedly`].
    RunRepeatedly,
    /// [`Executable::run_chain`].
    RunChain,
    /// [`Executable::read_state`].
    ReadState,
}

/// What a wrapper changes about the backend it wraps and the executables that backend
/// compiles; each hook's default leaves the inner one's behaviour as it is. The wrapper is
/// cloned into every executable compiled and every device opened again, so state they must
/// share (a counter, a signal) lives behind an `Rc`.
pub trait Wrap: Clone + 'static {
    /// The wrapped backend's [`Backend::name`].
    fn name(&self, inner: &dyn Backend) -> &'static str {
        inner.name()
    }

    /// The device the wrapped backend's [`Backend::reopen`] wraps alike: by default the inner
    /// backend's new device.
    fn reopen(&self, inner: &dyn Backend) -> impl Future<Output = Result<Box<dyn Backend>>> {
        inner.reopen()
    }

    /// Runs before every `call` of a compiled executable; an error is the call's, and the
    /// inner executable is not asked.
    fn before(&self, call: Call) -> impl Future<Output = Result<()>> {
        let _ = call;
        std::future::ready(Ok(()))
    }

    /// Sees, and may change, the outputs of one [`Executable::run`] (`outputs` are the names
    /// asked for). Chains' outputs do not pass through it.
    fn after_run(&self, outputs: &[&str], got: &mut HashMap<String, Tensor>) {
        let _ = (outputs, got);
    }

    /// Sees, and may change, what [`Executable::read_state`] read of the persistent buffer
    /// `name`.
    fn after_read_state(&self, name: &str, state: &mut Tensor) {
        let _ = (name, state);
    }
}

/// A backend wrapped in `W`: a [`Backend`] that forwards to `inner` but for what `W`
/// changes, and wraps every executable it compiles in a [`WrappedExecutable`].
pub struct Wrapped<W> {
    inner: Box<dyn Backend>,
    wrap: W,
}

impl<W: Wrap> Wrapped<W> {
    pub fn new(inner: Box<dyn Backend>, wrap: W) -> Self {
        Wrapped { inner, wrap }
    }

    fn around(&self, inner: Box<dyn Backend>) -> Box<dyn Backend> {
        Box::new(Wrapped::new(inner, self.wrap.clone()))
    }
}

impl<W: Wrap> Backend for Wrapped<W> {
    fn name(&self) -> &'static str {
        self.wrap.name(self.inner.as_ref())
    }

    fn compile_linked<'a>(
        &'a self,
        plans: Vec<&'a Plan>,
        weights: &'a Weights,
    ) -> BoxFuture<'a, Vec<Box<dyn Executable>>> {
        Box::pin(async move {
            let executables = self.inner.compile_linked(plans, weights).await?;
            Ok(executables
                .into_iter()
                .map(|inner| Box::new(WrappedExecutable::new(inner, self.wrap.clone())) as Box<dyn Executable>)
                .collect())
        })
    }

    fn f16_products(&self) -> bool {
        self.inner.f16_products()
    }

    /// The inner backend's variant, wrapped alike.
    fn with_f32_products(&self) -> Option<Box<dyn Backend>> {
        self.inner.with_f32_products().map(|inner| self.around(inner))
    }

    /// [`Wrap::reopen`]'s device, wrapped alike.
    fn reopen(&self) -> BoxFuture<'_, Box<dyn Backend>> {
        Box::pin(async move { Ok(self.around(self.wrap.reopen(self.inner.as_ref()).await?)) })
    }

    fn lose_device(&self) -> Result<()> {
        self.inner.lose_device()
    }
}

/// An executable wrapped in `W`: [`Wrap::before`] ahead of every call, the results through
/// [`Wrap::after_run`] and [`Wrap::after_read_state`], the rest forwarded to `inner`.
pub struct WrappedExecutable<W> {
    inner: Box<dyn Executable>,
    wrap: W,
}

impl<W: Wrap> WrappedExecutable<W> {
    pub fn new(inner: Box<dyn Executable>, wrap: W) -> Self {
        WrappedExecutable { inner, wrap }
    }
}

impl<W: Wrap> Executable for WrappedExecutable<W> {
    fn run<'a>(
        &'a mut self,
        inputs: &'a HashMap<String, Tensor>,
        scalars: &'a HashMap<String, u32>,
        outputs: &'a [&'a str],
    ) -> BoxFuture<'a, HashMap<String, Tensor>> {
        Box::pin(async move {
            self.wrap.before(Call::Run).await?;
            let mut got = self.inner.run(inputs, scalars, outputs).await?;
            self.wrap.after_run(outputs, &mut got);
            Ok(got)
        })
    }

    fn read_state<'a>(&'a mut self, name: &'a str) -> BoxFuture<'a, Tensor> {
        Box::pin(async move {
            self.wrap.before(Call::ReadState).await?;
            let mut state = self.inner.read_state(name).await?;
            self.wrap.after_read_state(name, &mut state);
            Ok(state)
        })
    }

    fn run_repeatedly<'a>(
        &'a mut self,
        inputs: &'a HashMap<String, Tensor>,
        scalars: &'a HashMap<String, u32>,
        times: usize,
    ) -> BoxFuture<'a, ()> {
        Box::pin(async move {
            self.wrap.before(Call::RunRepeatedly).await?;
            self.inner.run_repeatedly(inputs, scalars, times).await
        })
    }

    fn run_chain<'a>(&'a mut self, chain: Chain<'a>) -> BoxFuture<'a, Vec<HashMap<String, Tensor>>> {
        Box::pin(async move {
            self.wrap.before(Call::RunChain).await?;
            self.inner.run_chain(chain).await
        })
    }

    fn launches(&self) -> Option<usize> {
        self.inner.launches()
    }

    fn feeds_on_device(&self) -> bool {
        self.inner.feeds_on_device()
    }
}

#[cfg(test)]
mod tests {
    use std::cell::RefCell;
    use std::rc::Rc;

    use super::*;
    use crate::exec::cpu::CpuBackend;
    use crate::ir::{DType, Graph, TensorType};

    /// Records the calls and doubles every output and state read.
    #[derive(Clone, Default)]
    struct Doubling(Rc<RefCell<Vec<Call>>>);

    fn doubled(t: &Tensor) -> Tensor {
        Tensor::f32(t.shape().clone(), t.to_f32().iter().map(|x| 2.0 * x).collect()).unwrap()
    }

    impl Wrap for Doubling {
        fn name(&self, _inner: &dyn Backend) -> &'static str {
            "doubling"
        }

        async fn before(&self, call: Call) -> Result<()> {
            self.0.borrow_mut().push(call);
            Ok(())
        }

        fn after_run(&self, _outputs: &[&str], got: &mut HashMap<String, Tensor>) {
            got.values_mut().for_each(|t| *t = doubled(t));
        }

        fn after_read_state(&self, _name: &str, state: &mut Tensor) {
            *state = doubled(state);
        }
    }

    /// `y = x + 1`, also kept in the persistent buffer `s`; `x` fed from `y` in chains.
    fn plan() -> Plan {
        let mut g = Graph::new("plus one");
        let ty = TensorType::new(DType::F32, [2]);
        let x = g.input("x", ty.clone()).unwrap();
        let one = g.constant(Tensor::f32([2], vec![1.0, 1.0]).unwrap());
        let y = g.add(x, one).unwrap();
        let s = g.state("s", ty).unwrap();
        g.write_state(s, y).unwrap();
        g.output("y", y).unwrap();
        crate::plan::plan(g).unwrap()
    }

    #[test]
    fn a_wrapped_backend_changes_what_its_wrapper_says_and_forwards_the_rest() {
        let calls = Doubling::default();
        let backend = Wrapped::new(Box::new(CpuBackend::new()), calls.clone());
        assert_eq!(backend.name(), "doubling");
        assert!(!backend.f16_products());
        assert!(backend.with_f32_products().is_none());
        let lost = backend.lose_device().unwrap_err().to_string();
        assert!(lost.contains("the cpu backend has no device to lose"), "{lost}");
        let reopened = pollster::block_on(backend.reopen()).err().unwrap().to_string();
        assert!(reopened.contains("the cpu backend cannot open its device again"), "{reopened}");

        let plan = plan();
        let mut exe = pollster::block_on(backend.compile(&plan, &HashMap::new())).unwrap();
        assert_eq!(exe.launches(), None);
        assert!(!exe.feeds_on_device());
        let inputs = HashMap::from([("x".to_string(), Tensor::f32([2], vec![1.0, 2.0]).unwrap())]);
        let scalars = HashMap::new();
        let got = pollster::block_on(exe.run(&inputs, &scalars, &["y"])).unwrap();
        assert_eq!(got["y"].to_f32(), [4.0, 6.0]);
        assert_eq!(pollster::block_on(exe.read_state("s")).unwrap().to_f32(), [4.0, 6.0]);
        pollster::block_on(exe.run_repeatedly(&inputs, &scalars, 2)).unwrap();
        let runs = [HashMap::new(), HashMap::new()];
        let chain = Chain { inputs: &inputs, scalars: &runs, feeds: &[("y", "x")], outputs: &["y"] };
        let chained = pollster::block_on(exe.run_chain(chain)).unwrap();
        let chained: Vec<Vec<f32>> = chained.iter().map(|out| out["y"].to_f32()).collect();
        assert_eq!(chained, [vec![2.0, 3.0], vec![3.0, 4.0]], "chains are not changed");
        assert_eq!(*calls.0.borrow(), [Call::Run, Call::ReadState, Call::RunRepeatedly, Call::RunChain]);
    }
}
